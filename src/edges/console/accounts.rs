//! Console accounts (`console_usuario`): an e-mail, a role, an argon2id password hash. Every
//! statement on that table is here; `users add|list|remove` call them as the schema's owner, and
//! a trigger writes each change to the audit trail with the database role that made it.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use chrono::{DateTime, Utc};
use sqlx::PgPool;

use replay_ledger_core::shared::words::db_words;

db_words! {
    /// What an account may do in the console (`console_usuario.papel`).
    pub enum Role("console role") {
        /// Reads every page.
        Viewer = "leitor",
        /// Reads, and approves finished simulations.
        Finance = "financeiro",
        /// Reads, and resolves review items.
        Operator = "operador",
    }
}

impl Role {
    /// The name on the command line and in the pages: `viewer`, `finance`, `operator`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Finance => "finance",
            Role::Operator => "operator",
        }
    }

    /// A role by its command-line name.
    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.iter().copied().find(|r| r.name() == name)
    }

    pub fn may_approve(self) -> bool {
        self == Role::Finance
    }

    pub fn may_resolve(self) -> bool {
        self == Role::Operator
    }

    /// Asks `serve` to start the real run of an approved simulation (see `console_solicitar`).
    pub fn may_start(self) -> bool {
        matches!(self, Role::Finance | Role::Operator)
    }

    /// Asks `serve` to resume an interrupted or failed real run.
    pub fn may_resume(self) -> bool {
        self == Role::Operator
    }

    /// Asks a real run in progress to stop at its next batch boundary (finance started it; an
    /// operator may too).
    pub fn may_interrupt(self) -> bool {
        matches!(self, Role::Finance | Role::Operator)
    }

    /// Asks `serve` for a sweeper pass now.
    pub fn may_sweep(self) -> bool {
        self == Role::Operator
    }
}

/// An account as listed (never its hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub email: String,
    pub role: Role,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    /// Open sessions right now (idle ones included until they are swept).
    pub sessions: i64,
}

replay_ledger_core::tables::db::from_row!(Account { email, role = "papel", created_at = "criado_em", created_by = "criado_por", sessions });

/// Why an account could not be added.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("`{0}` is not an e-mail address (one `@`, no spaces or control characters, at most 254 characters)")]
    Email(String),
    #[error("the password is shorter than {MIN_PASSWORD_CHARS} characters")]
    ShortPassword,
    #[error("the password is longer than {MAX_PASSWORD_BYTES} bytes")]
    LongPassword,
    #[error("the password holds a control character (NUL, a line break, an escape …) or nothing but spaces: choose one of printable characters")]
    UnprintablePassword,
    #[error("`{0}` mixes writing systems (Latin with Cyrillic or Greek, say): an address is written in one script, so a look-alike of another account's cannot be made")]
    MixedScripts(String),
    #[error("`{address}` holds `{letter}`, a letter that passes for a plain Latin one (dotless ı, long ſ, …): write the address with the letter it looks like, so it cannot pass for another account's")]
    LookAlike { address: String, letter: char },
    #[error("hashing the password: {0}")]
    Hash(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The shortest password `users add` accepts.
pub const MIN_PASSWORD_CHARS: usize = 12;
/// The longest password hashed (a bound on the work a login may cost).
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// An e-mail as stored: trimmed, lowercased and in Unicode NFC (so `josé` typed composed or
/// decomposed is one account), checked for shape by lettre's own [`lettre::Address`] (the
/// parser the mailer uses: one `@`, a local part of at most 64 bytes in dot-atoms, no empty
/// label around a dot as in `fin@x.`, `.fin@x`, `a..b@x`, host labels that start and end with a
/// letter or digit), and by this house's rules on top: at most 254 characters, no quoted local
/// part, no white space or control character.
pub fn normalize_email(email: &str) -> Result<String, AccountError> {
    use unicode_normalization::UnicodeNormalization;
    let email: String = email.trim().to_lowercase().nfc().collect();
    let shaped = email.chars().count() <= 254
        && !email.contains('"')
        && !email
            .chars()
            .any(|c| c.is_whitespace() || replay_ledger_core::shared::text::is_hazard(c))
        && email.parse::<lettre::Address>().is_ok();
    if !shaped {
        return Err(AccountError::Email(
            replay_ledger_core::shared::text::inert(&email),
        ));
    }
    if let Some(letter) = email.chars().find(|c| passes_for_latin(*c)) {
        return Err(AccountError::LookAlike {
            address: replay_ledger_core::shared::text::inert(&email),
            letter,
        });
    }
    let mut scripts = email.chars().filter_map(script);
    if let Some(first) = scripts.next() {
        if scripts.any(|s| s != first) {
            return Err(AccountError::MixedScripts(
                replay_ledger_core::shared::text::inert(&email),
            ));
        }
    }
    Ok(email)
}

/// A Latin letter beyond ASCII that is not an ASCII letter with marks on it (é is e and an acute;
/// ı, ſ, ɑ, ɡ are letters of their own that read as i, s, a, g): a look-alike inside one script,
/// which the one-script rule cannot see.
fn passes_for_latin(c: char) -> bool {
    use unicode_normalization::UnicodeNormalization;
    let latin = matches!(u32::from(c), 0x00C0..=0x024F | 0x1E00..=0x1EFF | 0x0250..=0x02AF);
    latin
        && c.is_alphabetic()
        && !std::iter::once(c)
            .nfd()
            .next()
            .is_some_and(|base| base.is_ascii_alphabetic())
}

/// The writing system of a letter (`None` for digits, punctuation and other shared signs):
/// Latin, Greek and Cyrillic by their blocks, anything else by its 128-character block, which is
/// enough to tell two scripts of one address apart.
fn script(c: char) -> Option<u32> {
    if !c.is_alphabetic() {
        return None;
    }
    Some(match u32::from(c) {
        0x0000..=0x024f | 0x1e00..=0x1eff | 0x2c60..=0x2c7f | 0xa720..=0xa7ff => 0,
        0x0370..=0x03ff | 0x1f00..=0x1fff => 1,
        0x0400..=0x052f | 0x1c80..=0x1c8f | 0x2de0..=0x2dff | 0xa640..=0xa69f => 2,
        other => 3 + other / 0x80,
    })
}

/// A password `users add` may store: long enough, not too long for a login to check, printable
/// and not only spaces (what a person can type again at the login form).
pub fn check_password(password: &str) -> Result<(), AccountError> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(AccountError::ShortPassword);
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(AccountError::LongPassword);
    }
    if password
        .chars()
        .any(replay_ledger_core::shared::text::is_hazard)
        || password.trim().is_empty()
    {
        return Err(AccountError::UnprintablePassword);
    }
    Ok(())
}

/// An argon2id hash of `password` in PHC form (RustCrypto's defaults: 19 MiB, 2 passes).
pub fn hash_password(password: &str) -> Result<String, AccountError> {
    check_password(password)?;
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| AccountError::Hash(e.to_string()))
}

/// A password of 20 characters drawn from 57 letters and digits (no look-alikes such as `l`, `1`,
/// `O`, `0`): about 116 bits, from the operating system's random source.
pub fn generated_password() -> String {
    use argon2::password_hash::rand_core::RngCore;
    const ALPHABET: &[u8] = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    (0..20)
        .map(|_| {
            // Rejection sampling keeps every character equally likely.
            loop {
                let b = (OsRng.next_u32() & 0x3f) as usize;
                if b < ALPHABET.len() {
                    return char::from(ALPHABET[b]);
                }
            }
        })
        .collect()
}

/// Whether `password` matches `hash` (false for a malformed hash or an overlong password).
pub fn verify_password(password: &str, hash: &str) -> bool {
    if password.len() > MAX_PASSWORD_BYTES {
        return false;
    }
    PasswordHash::new(hash).is_ok_and(|parsed| {
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// Adds an account, or gives an existing one this role and password (its sessions end).
/// Returns whether it was new.
pub async fn add(
    pool: &PgPool,
    email: &str,
    role: Role,
    password: &str,
) -> Result<bool, AccountError> {
    let email = normalize_email(email)?;
    let password = password.to_string();
    let hash = tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|e| AccountError::Hash(e.to_string()))??;
    let mut tx = pool.begin().await?;
    let new: bool = sqlx::query_scalar(
        r#"
        insert into console_usuario (email, papel, senha_hash) values ($1, $2, $3)
        on conflict (email) do update
        set papel = excluded.papel, senha_hash = excluded.senha_hash, atualizado_em = now()
        returning xmax = 0
        "#,
    )
    .bind(&email)
    .bind(role)
    .bind(&hash)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query("delete from console_sessao where email = $1")
        .bind(&email)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(new)
}

/// Every account, by e-mail.
pub async fn list(pool: &PgPool) -> Result<Vec<Account>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select u.email, u.papel, u.criado_em, u.criado_por,
               (select count(*) from console_sessao s where s.email = u.email) as sessions
        from console_usuario u order by u.email
        "#,
    )
    .fetch_all(pool)
    .await
}

/// Removes an account and its sessions; returns whether it existed.
pub async fn remove(pool: &PgPool, email: &str) -> Result<bool, sqlx::Error> {
    use unicode_normalization::UnicodeNormalization;
    let email: String = email.trim().to_lowercase().nfc().collect();
    let removed = sqlx::query("delete from console_usuario where email = $1")
        .bind(&email)
        .execute(pool)
        .await?;
    Ok(removed.rows_affected() == 1)
}

/// The role and password hash of an account, for a login.
pub(super) async fn credentials(
    pool: &PgPool,
    email: &str,
) -> Result<Option<(Role, String)>, sqlx::Error> {
    sqlx::query_as("select papel, senha_hash from console_usuario where email = $1")
        .bind(email)
        .fetch_optional(pool)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_verifies_against_its_own_argon2id_hash_only() {
        let hash = hash_password("correct horse battery").unwrap();

        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(verify_password("correct horse battery", &hash));
        assert!(!verify_password("correct horse batterx", &hash));
        assert!(!verify_password("correct horse battery", "not a hash"));
    }

    #[test]
    fn short_passwords_and_malformed_emails_are_refused() {
        assert!(matches!(
            hash_password("short"),
            Err(AccountError::ShortPassword)
        ));
        assert_eq!(
            normalize_email(" Ana@Example.COM ").unwrap(),
            "ana@example.com"
        );
        for bad in [
            "ana",
            "@x",
            "a@b@c",
            "a b@c",
            "a\u{1b}@c",
            "x@",
            "a\0@c",
            "fin@x.",
            ".fin@x",
            "a..b@x",
            "\"fin\"@x",
            "fin@-x.example",
            "a(b)@x",
        ] {
            assert!(normalize_email(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn passwords_of_spaces_or_control_characters_are_refused() {
        for bad in [
            " ".repeat(14),
            "\0".repeat(20),
            "abcdefghijkl\u{7}".into(),
            "\t".repeat(13),
        ] {
            assert!(
                matches!(check_password(&bad), Err(AccountError::UnprintablePassword)),
                "{bad:?}"
            );
        }
        assert!(check_password("correct horse battery staple").is_ok());
    }

    #[test]
    fn an_address_is_written_in_one_script() {
        // `а` below is Cyrillic (U+0430): a look-alike of ana@example.com.
        assert!(matches!(
            normalize_email("\u{430}na@example.com"),
            Err(AccountError::MixedScripts(_))
        ));
        assert!(normalize_email("joão@exemplo.com.br").is_ok());
        // `ı` (U+0131, dotless i) is Latin too: a look-alike of fin@example.com all the same.
        assert!(matches!(
            normalize_email("f\u{131}n@example.com"),
            Err(AccountError::LookAlike {
                letter: '\u{131}',
                ..
            })
        ));
        assert!(normalize_email("ſabrina@example.com").is_err());
        assert!(normalize_email("иван@пример.рф").is_ok());
    }
}
