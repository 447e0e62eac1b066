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

/// Every stored object of a type, sorted by key.
pub async fn list<T: Object>(db: &Db) -> Result<Vec<T>> {
    db.read(async |tx| Ok::<_, Error>(tx.list::<T>(&keys::model_prefix(T::TYPE), T::TYPE).await?))
        .await
}

/// One object, or `NotFound`.
pub async fn get<T: Object>(db: &Db, key: &str) -> Result<T> {
    db.read(async |tx| load_required::<T>(tx, key).await).await
}

/// Create or update an object; returns the stored object.
pub async fn upsert<T: Object>(db: &Db, key: &str, body: T) -> Result<T> {
    db.write(async |tx| {
        let mut obj = body.clone();
        obj.set_key(key.to_string());
        obj.normalize();
        validate::key_matches(key, &obj.derived_key())?;
        obj.validate()?;
        match load::<T>(tx, key).await? {
            Some(old) => {
                obj.keep_links(&old);
                if obj == old {
                    return Ok(old);
                }
                T::update(tx, &old, &mut obj).await?;
            }
            None => T::create(tx, &mut obj).await?,
        }
        save(tx, &obj)?;
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
        Ok(json!({ "Config": obj, "Oper": oper }))
    })
    .await
}
