//! Generic object operations behind the REST routes (reference §2.2), each one optimistic
//! transaction:
//! * upsert: the URL key overrides the body's `key`; the derived key must match; validate; an
//!   identical re-POST of a stored object is a no-op success; otherwise update or create, then store.
//! * delete: the kind's delete effects, then remove the object.
//! * inspect: `{"Config": object, "Oper": {...}}`.

use serde_json::{Value, json};

use super::{Object, load, load_required, save, validate};
use crate::error::{Error, Result};
use crate::store::keys;
use crate::store::txn::Db;

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
    let (obj, updated) = db
        .write(async |tx| {
            let mut obj = body.clone();
            obj.set_key(key.to_string());
            obj.normalize();
            validate::key_matches(key, &obj.derived_key())?;
            obj.validate()?;
            let updated = match load::<T>(tx, key).await? {
                Some(old) => {
                    obj.keep_links(&old);
                    if obj == old {
                        return Ok::<_, Error>((old, true));
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
        })
        .await?;
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

/// Delete an object; `NotFound` if it does not exist.
pub async fn delete<T: Object>(db: &Db, key: &str) -> Result<()> {
    db.write(async |tx| {
        let obj = load_required::<T>(tx, key).await?;
        T::delete(tx, &obj).await?;
        tx.delete(&T::store_key(key));
        Ok(())
    })
    .await
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
