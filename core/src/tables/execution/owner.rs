//! Ownership epochs (`reprocessamento_dono`, invariant `one-owner`): taking an execution
//! increments its epoch, and every write that belongs to the owner is conditioned on the epoch it
//! took, through the database's `confirmar_dono` (see the migration for why it locks). A process
//! whose advisory lock died with a database restart may still be running when another takes the
//! execution: its next write fails with [`FENCED`] and changes nothing, so it can neither move the
//! checkpoint nor add to the figures nor reserve a key after the new owner settled its
//! reservations.

use sqlx::PgConnection;

/// The two keys of an execution's advisory lock: a constant for this program ('RPLD') and a hash
/// of the execution's key. The database's `confirmar_dono` checks the same lock (migration
/// `20261203010000_ownership_epoch.sql`): change both or neither.
pub(super) const LOCK_CLASS: i32 = 0x5250_4c44;

/// How long taking an execution waits for the writes its previous owner had confirmed: they
/// are single batches' statements, so anything longer is a previous owner still at work.
pub(super) const TAKE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Takes the session advisory lock `(class, hashtext(name))` on `conn` if it is free: the one
/// statement of every lock this program takes (an execution's, a job's in `serve`).
pub async fn try_advisory_lock(
    conn: &mut PgConnection,
    class: i32,
    name: &str,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("select pg_try_advisory_lock($1, hashtext($2))")
        .bind(class)
        .bind(name)
        .fetch_one(conn)
        .await
}

/// The SQLSTATE `confirmar_dono` raises when a newer owner took the execution.
pub const FENCED: &str = "RLOWN";

/// Proof that this process took an execution: its checkpoint key and the epoch it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub key: String,
    pub epoch: i64,
}

impl Owner {
    /// Takes the execution: increments its epoch. Called on the connection that holds the
    /// execution's advisory lock, right after taking it. Waits for every write the previous owner
    /// had confirmed to commit, at most `lock_timeout`.
    pub(super) async fn take(
        conn: &mut PgConnection,
        key: &str,
        lock_timeout: std::time::Duration,
    ) -> Result<Owner, sqlx::Error> {
        let mut tx = sqlx::Connection::begin(conn).await?;
        sqlx::query("select set_config('lock_timeout', $1, true)")
            .bind(format!("{}ms", lock_timeout.as_millis()))
            .execute(&mut *tx)
            .await?;
        let epoch: i64 = sqlx::query_scalar(
            r#"
            insert into reprocessamento_dono (execucao_id, epoca, tomada_por)
            values ($1, 1, current_setting('application_name'))
            on conflict (execucao_id) do update
            set epoca = reprocessamento_dono.epoca + 1, tomada_em = now(),
                tomada_por = excluded.tomada_por
            returning epoca
            "#,
        )
        .bind(key)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Owner {
            key: key.to_string(),
            epoch,
        })
    }

    /// Confirms that this owner still owns the execution, and holds that until the caller's
    /// transaction ends: the first statement of every owner's transaction. Fails with
    /// [`FENCED`] when a newer owner took it.
    pub async fn confirm(&self, conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        sqlx::query("select confirmar_dono($1, $2)")
            .bind(&self.key)
            .bind(self.epoch)
            .execute(conn)
            .await?;
        Ok(())
    }
}

impl Owner {
    /// Whether this epoch is still the execution's newest: `false` once another process took it.
    pub async fn still_newest(&self, pool: &sqlx::PgPool) -> Result<bool, sqlx::Error> {
        let epoch: Option<i64> =
            sqlx::query_scalar("select epoca from reprocessamento_dono where execucao_id = $1")
                .bind(&self.key)
                .fetch_optional(pool)
                .await?;
        Ok(epoch.is_none_or(|e| e == self.epoch))
    }
}

/// Whether `err` says that a newer owner took the execution (the write changed nothing).
pub fn is_fenced(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.code().as_deref() == Some(FENCED))
}
