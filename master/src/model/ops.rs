//! Generic object operations behind the REST routes (reference §2.2), each one optimistic
//! transaction:
//! * upsert: the URL key overrides the body's `key`; the derived key must match; validate; an
//!   identical re-POST of a stored object is a no-op success; otherwise update or create, then store.
//! * delete: the kind's delete effects, then remove the object.
//! * REST writes go through the group commit ([`upsert_batched`], [`delete_batched`]; see
//!   `crate::batch`), everything else through its own transaction ([`upsert`], [`delete`]).
//! * inspect: `{"Config": object, "Oper": {...}}`.

use futures::future::LocalBoxFuture;
use serde_json::{Value, json};

use super::{Object, ReadAhead, load, load_required, save, validate};
use crate::batch::{Request, Writes};
use crate::error::{Error, Result};
use crate::store::keys;
use crate::store::txn::{Db, Tx};

/// Every stored object of a type, sorted by key, with its computed link sets.
pub async fn list<T: Object>(db: &Db) -> Result<Vec<T>> {
    db.read(async |tx| {
        let mut objs = tx.list::<T>(&keys::model_prefix(T::TYPE), T::TYPE).await?;
        T::derive_links(tx, &mut objs).await?;
        Ok::<_, Error>(objs)
    })
    .await
}

/// One object with its computed link sets, or `NotFound`.
pub async fn get<T: Object>(db: &Db, key: &str) -> Result<T> {
    db.read(async |tx| {
        let obj = load_required::<T>(tx, key).await?;
        let mut one = [obj];
        T::derive_links(tx, &mut one).await?;
        let [obj] = one;
        Ok(obj)
    })
    .await
}

/// Create or update an object; returns the stored object (after an update, with its computed link
/// sets; a new object has none: nothing can name it yet).
pub async fn upsert<T: Object>(db: &Db, key: &str, body: T) -> Result<T> {
    let (obj, updated) = db.write(async |tx| upsert_in(tx, key, &body).await).await?;
    with_links(db, obj, updated).await
}

/// [`upsert`] through the group commit (`batch`): committed with whatever else is queued.
pub async fn upsert_batched<T: Object>(writes: &Writes, db: &Db, key: &str, body: T) -> Result<T> {
    let (obj, updated) = writes
        .submit(Upsert {
            key: key.to_string(),
            body,
        })
        .await?;
    with_links(db, obj, updated).await
}

/// An updated object's computed link sets (a new one has none).
async fn with_links<T: Object>(db: &Db, obj: T, updated: bool) -> Result<T> {
    if !updated {
        return Ok(obj);
    }
    db.read(async |tx| {
        let mut one = [obj.clone()];
        T::derive_links(tx, &mut one).await?;
        let [obj] = one;
        Ok(obj)
    })
    .await
}

/// Create or update an object inside a transaction; returns the stored object and whether it
/// existed before.
pub async fn upsert_in<T: Object>(tx: &mut Tx<'_>, key: &str, body: &T) -> Result<(T, bool)> {
    let mut obj = body.clone();
    obj.set_key(key.to_string());
    obj.normalize();
    validate::key_matches(key, &obj.derived_key())?;
    obj.validate()?;
    let updated = match load::<T>(tx, key).await? {
        Some(old) => {
            obj.keep_links(&old);
            if obj == old {
                return Ok((old, true));
            }
            T::update(tx, &old, &mut obj).await?;
            true
        }
        None => {
            T::create(tx, &mut obj).await?;
            false
        }
    };
    save(tx, &obj)?;
    obj.strip_derived();
    Ok((obj, updated))
}

/// Delete an object; `NotFound` if it does not exist.
pub async fn delete<T: Object>(db: &Db, key: &str) -> Result<()> {
    db.write(async |tx| delete_in::<T>(tx, key).await).await
}

/// [`delete`] through the group commit (`batch`).
pub async fn delete_batched<T: Object>(writes: &Writes, key: &str) -> Result<()> {
    writes
        .submit(Delete::<T> {
            key: key.to_string(),
            kind: std::marker::PhantomData,
        })
        .await
}

/// Delete an object inside a transaction.
pub async fn delete_in<T: Object>(tx: &mut Tx<'_>, key: &str) -> Result<()> {
    let obj = load_required::<T>(tx, key).await?;
    T::delete(tx, &obj).await?;
    tx.delete(&T::store_key(key));
    Ok(())
}

/// A create or update request for the group commit.
struct Upsert<T> {
    key: String,
    body: T,
}

impl<T: Object> Request for Upsert<T> {
    type Output = (T, bool);
    fn prefetch(&self) -> ReadAhead {
        let mut ahead = ReadAhead::keys(vec![T::store_key(&self.key)]);
        ahead.extend(self.body.read_ahead(&self.key));
        ahead
    }
    fn apply<'a>(&'a self, tx: &'a mut Tx<'_>) -> LocalBoxFuture<'a, Result<(T, bool)>> {
        Box::pin(upsert_in(tx, &self.key, &self.body))
    }
}

/// A delete request for the group commit.
struct Delete<T> {
    key: String,
    kind: std::marker::PhantomData<fn() -> T>,
}

impl<T: Object> Request for Delete<T> {
    type Output = ();
    fn prefetch(&self) -> ReadAhead {
        ReadAhead::keys(vec![T::store_key(&self.key)])
    }
    fn apply<'a>(&'a self, tx: &'a mut Tx<'_>) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(delete_in::<T>(tx, &self.key))
    }
}

/// `{"Config": object, "Oper": {...}}`.
pub async fn inspect<T: Object>(db: &Db, key: &str) -> Result<Value> {
    db.read(async |tx| {
        let obj = load_required::<T>(tx, key).await?;
        let oper = T::oper(tx, &obj).await?;
        let mut one = [obj];
        T::derive_links(tx, &mut one).await?;
        let [obj] = one;
        Ok(json!({ "Config": obj, "Oper": oper }))
    })
    .await
}
