//! What each database role may do, said once: the statements `replay-ledger grants` runs as the
//! owner that ran `migrate` (or prints for a DBA). Duties are split (invariant `who-is-proven`):
//!
//! - the **worker** runs, sweeps, consumes, serves and reports. It writes the ledger, the
//!   checkpoints, the executions, the diff and the corrections, but cannot insert an approval or
//!   a review decision, cannot change an `incerto` effect (a row trigger lets only the owner) and
//!   cannot mark an execution `concluida` before its checkpoint has passed its window (another);
//! - the **approver** reads everything and inserts approvals — not the `aprovado_por` column,
//!   whose default is `session_user`, so an approval names the role that made it;
//! - the **reviewer** reads everything and resolves `incerto` effects, only through the
//!   `security definer` function `resolver_incerto`, which records `session_user`;
//! - the **console** (the web console's role) reads everything, keeps its sessions, and records
//!   approvals and review decisions only through `security definer` functions that take the
//!   session, check its account's role and record the account (`console:<email>`); every approval
//!   and decision writes its audit row by a trigger, so none exists without the other. It asks
//!   for a run, a resume or a sweep the same way (`console_solicitar`, audited in the same
//!   transaction); the worker (`serve`) claims and runs the request, so the console itself
//!   never writes `comissao` or `efeito_aplicado`.
//!
//! Each role first loses every privilege it had on replay-ledger's objects, so running `grants`
//! again after an upgrade leaves exactly this list (the README's older list gave the worker
//! approvals and review decisions). Roles are quoted as identifiers, never pasted into SQL.

use sqlx::PgPool;

use crate::shared::text::inert;

/// Every table of replay-ledger: the seed's and the additions.
const TABLES: &[&str] = &[
    "evento_arquivado",
    "comissao",
    "efeito_aplicado",
    "efeito_tentativa",
    // The attempt history with the first-try successes the ledger rows imply (a view).
    "efeito_tentativa_historico",
    "efeito_revisao",
    "reprocessamento_checkpoint",
    "reprocessamento_diff",
    "reprocessamento_execucao",
    "reprocessamento_correcao",
    "evento_rejeitado",
    "reprocessamento_aprovacao",
    // The diff each approval was given for, kept by a trigger on the approval.
    "reprocessamento_diff_aprovado",
    "relatorio_job",
    "reprocessamento_contagem",
    "job_rodada",
    "consumo_ao_vivo",
    "reprocessamento_dono",
    "reprocessamento_arrendamento",
    "reprocessamento_passagem",
    "reprocessamento_progresso",
    // What people asked for from the console; `serve` claims and settles them.
    "execucao_solicitada",
    // The corrections verify jobs propose (one gated replay job per wrong day).
    "job_proposto",
    // A run's pace over time (the console's chart).
    "reprocessamento_ritmo",
    // The blue-green rebuild of `comissao`: its state, the queue of orders written meanwhile
    // (filled by a `security definer` trigger, whoever writes), the orders that differ.
    "comissao_reconstrucao",
    "comissao_reconstrucao_fila",
    "comissao_reconstrucao_diff",
    // The differing rows each rebuild approval was given for (kept by the approval's trigger).
    "comissao_reconstrucao_diff_aprovado",
];

const SEQUENCES: &[&str] = &[
    "efeito_tentativa_id_seq",
    "efeito_revisao_id_seq",
    "reprocessamento_aprovacao_id_seq",
    "execucao_solicitada_id_seq",
];

/// The one way to resolve a review item.
const RESOLVE: &str = "resolver_incerto(text, text, text)";

/// How a worker ends a lapsed holder's sessions, whatever that holder's role: the function
/// judges and ends them with the owner's rights (no `pg_signal_backend` needed).
const TAKEOVER: &str = "reprocessamento_encerrar_caducado(text, integer, interval)";

/// The web console's tables: accounts (password hashes), sessions (token digests), login
/// attempts, the audit trail. Only the console reads them.
const CONSOLE_TABLES: &[&str] = &[
    "console_usuario",
    "console_sessao",
    "console_tentativa_login",
    "console_auditoria",
];

const CONSOLE_SEQUENCES: &[&str] = &["console_tentativa_login_id_seq", "console_auditoria_id_seq"];

/// What the console may call: each records its audit row with what it writes.
const CONSOLE_FUNCTIONS: &[&str] = &[
    "console_aprovar(text, interval, jsonb)",
    "console_aprovar_reconstrucao(text, interval, bigint, text, text)",
    "console_resolver_incerto(text, interval, text, text, text)",
    "console_abrir_sessao(text, text, text, text, interval)",
    "console_recusar_login(text, text)",
    "console_fechar_sessao(text, text)",
    "console_solicitar(text, interval, text, text, text, text)",
];

/// The worker's privileges, table by table (see docs/src/security.md, Least privileges, for why
/// each).
const WORKER: &[(&str, &[&str])] = &[
    (
        "select",
        &[
            "evento_arquivado",
            "reprocessamento_aprovacao",
            // The report compares what a run applied with what was approved.
            "reprocessamento_diff_aprovado",
            "efeito_tentativa_historico",
            // `status` and `/metrics` show the rebuild (which the schema's owner runs).
            "comissao_reconstrucao",
        ],
    ),
    (
        "select, insert, update",
        &[
            "comissao",
            "reprocessamento_execucao",
            "reprocessamento_correcao",
            "consumo_ao_vivo",
            // Taking an execution increments its epoch; `confirmar_dono` locks it `for share`.
            "reprocessamento_dono",
            // The owner confirms its lease; a taker reads it before it ends a lapsed owner.
            "reprocessamento_arrendamento",
            // A run publishes its pace (an upsert per execution; nothing deletes it).
            "reprocessamento_progresso",
        ],
    ),
    (
        "select, insert, update, delete",
        &[
            "efeito_aplicado",
            "reprocessamento_checkpoint",
            "reprocessamento_diff",
            "reprocessamento_contagem",
        ],
    ),
    ("select, insert, delete", &["evento_rejeitado"]),
    (
        "select, insert",
        &["efeito_tentativa", "relatorio_job", "reprocessamento_ritmo"],
    ),
    ("select, insert, update", &["job_rodada", "job_proposto"]),
    // `serve` claims a request and records how it ended (those columns alone); only the
    // console's function inserts.
    ("select", &["execucao_solicitada"]),
    (
        "update (estado, iniciado_em, concluido_em, resultado)",
        &["execucao_solicitada"],
    ),
];

/// The columns of an approval its approver writes: all but `id` and `aprovado_em` (defaults) and
/// `aprovado_por` (default `session_user`).
const APPROVAL_COLUMNS: &[&str] = &[
    "execucao_id",
    "job",
    "simulacao_passagem",
    "simulacao_concluida_em",
    "pedidos",
    "pedidos_alterados",
    "total_antes_centavos",
    "total_depois_centavos",
    "eventos_total",
    "eventos_max_posicao",
    "eventos_hash",
    "comissao_hash",
    "nota",
    "definicao",
    "versao_regra",
];

/// Why `grants` refused before touching the database, or what the database said.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    #[error("role name `{name}` {why}")]
    InvalidRole { name: String, why: &'static str },
    #[error("`{0}` is given two duties: the worker, the approver, the reviewer and the console are separate roles, so that none can do another's part")]
    SameRole(String),
    #[error(
        "role `{0}` does not exist: create it first (see docs/src/security.md, Least privileges)"
    )]
    NoSuchRole(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// A role name, checked: it is always written quoted, so any name PostgreSQL accepts is kept as
/// it is (case included), and nothing in it can end the identifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role(String);

impl Role {
    pub fn new(name: &str) -> Result<Role, GrantError> {
        let invalid = |why| GrantError::InvalidRole {
            name: inert(name),
            why,
        };
        if name.is_empty() {
            return Err(invalid("is empty"));
        }
        if name.len() > 63 {
            return Err(invalid(
                "is longer than 63 bytes: PostgreSQL would cut it to another name",
            ));
        }
        if name.chars().any(crate::shared::text::is_hazard) {
            return Err(invalid("has a control character"));
        }
        if matches!(name, "public" | "none") || name.starts_with("pg_") {
            return Err(invalid("is reserved by PostgreSQL"));
        }
        Ok(Role(name.to_string()))
    }

    pub fn name(&self) -> &str {
        &self.0
    }

    /// As a quoted identifier (`quote_ident` with quotes always).
    fn sql(&self) -> String {
        format!("\"{}\"", self.0.replace('"', "\"\""))
    }
}

/// Who does what: the worker always, the approver, the reviewer and the console when given.
#[derive(Debug, Clone)]
pub struct Duties {
    pub worker: Role,
    pub approver: Option<Role>,
    pub reviewer: Option<Role>,
    pub console: Option<Role>,
}

impl Duties {
    /// Checks the names, and that no role has two duties.
    pub fn new(
        worker: &str,
        approver: Option<&str>,
        reviewer: Option<&str>,
    ) -> Result<Duties, GrantError> {
        Duties::with_console(worker, approver, reviewer, None)
    }

    /// As [`Duties::new`], with the web console's role.
    pub fn with_console(
        worker: &str,
        approver: Option<&str>,
        reviewer: Option<&str>,
        console: Option<&str>,
    ) -> Result<Duties, GrantError> {
        let duties = Duties {
            worker: Role::new(worker)?,
            approver: approver.map(Role::new).transpose()?,
            reviewer: reviewer.map(Role::new).transpose()?,
            console: console.map(Role::new).transpose()?,
        };
        let roles = duties.roles();
        for (i, role) in roles.iter().enumerate() {
            if roles[..i].contains(role) {
                return Err(GrantError::SameRole(inert(role.name())));
            }
        }
        Ok(duties)
    }

    fn roles(&self) -> Vec<&Role> {
        std::iter::once(&self.worker)
            .chain(&self.approver)
            .chain(&self.reviewer)
            .chain(&self.console)
            .collect()
    }
}

/// The statements, in order: per role, revoke everything on replay-ledger's objects, then grant
/// its duty.
pub fn statements(duties: &Duties) -> Vec<String> {
    let mut out = Vec::new();
    for role in duties.roles() {
        out.extend(revoke_all(role));
    }
    let worker = duties.worker.sql();
    for (privileges, tables) in WORKER {
        out.push(format!(
            "grant {privileges} on {} to {worker}",
            tables.join(", ")
        ));
    }
    out.push(format!(
        "grant usage on sequence efeito_tentativa_id_seq to {worker}"
    ));
    out.push(format!("grant execute on function {TAKEOVER} to {worker}"));
    if let Some(approver) = &duties.approver {
        let approver = approver.sql();
        out.push(format!(
            "grant select on {} to {approver}",
            TABLES.join(", ")
        ));
        out.push(format!(
            "grant insert ({}) on reprocessamento_aprovacao to {approver}",
            APPROVAL_COLUMNS.join(", ")
        ));
        out.push(format!(
            "grant usage on sequence reprocessamento_aprovacao_id_seq to {approver}"
        ));
        // `rebuild --approve` notes its approval on the rebuild it approves.
        out.push(format!(
            "grant update (aprovacao_id) on comissao_reconstrucao to {approver}"
        ));
    }
    if let Some(reviewer) = &duties.reviewer {
        let reviewer = reviewer.sql();
        out.push(format!(
            "grant select on {} to {reviewer}",
            TABLES.join(", ")
        ));
        out.push(format!("grant execute on function {RESOLVE} to {reviewer}"));
    }
    if let Some(console) = &duties.console {
        out.extend(console_grants(console));
    }
    out
}

/// The console reads every table and its own, touches and ends its sessions, and writes nothing
/// else but through its functions.
fn console_grants(role: &Role) -> Vec<String> {
    let role = role.sql();
    vec![
        format!(
            "grant select on {}, {} to {role}",
            TABLES.join(", "),
            CONSOLE_TABLES.join(", ")
        ),
        format!("grant update (ultimo_uso), delete on console_sessao to {role}"),
        format!(
            "grant execute on function {} to {role}",
            CONSOLE_FUNCTIONS.join(", ")
        ),
    ]
}

fn revoke_all(role: &Role) -> [String; 5] {
    let role = role.sql();
    let sequences: Vec<&str> = SEQUENCES.iter().chain(CONSOLE_SEQUENCES).copied().collect();
    [
        format!(
            "revoke all on table {}, {} from {role}",
            TABLES.join(", "),
            CONSOLE_TABLES.join(", ")
        ),
        format!(
            "revoke all on sequence {} from {role}",
            sequences.join(", ")
        ),
        format!("revoke all on function {RESOLVE} from {role}"),
        format!("revoke all on function {TAKEOVER} from {role}"),
        format!(
            "revoke all on function {} from {role}",
            CONSOLE_FUNCTIONS.join(", ")
        ),
    ]
}

/// The statements as a script for `psql`, in one transaction.
pub fn script(duties: &Duties) -> String {
    let mut out = String::from(
        "-- replay-ledger grants: run as the owner that ran `migrate` (not necessarily a\n\
         -- superuser), in that database, with that schema first on the search_path.\n\
         begin;\n",
    );
    for statement in statements(duties) {
        out.push_str(&statement);
        out.push_str(";\n");
    }
    out.push_str("commit;\n");
    out
}

/// Runs the statements in one transaction, as the connected role (the owner). Every role must
/// exist already (creating roles is a DBA's task, with its passwords).
pub async fn apply(pool: &PgPool, duties: &Duties) -> Result<(), GrantError> {
    let names: Vec<&str> = duties.roles().iter().map(|r| r.name()).collect();
    let missing: Option<String> = sqlx::query_scalar(
        r#"
        select r from unnest($1::text[]) with ordinality as u(r, i)
        where not exists (select 1 from pg_catalog.pg_roles where rolname = u.r)
        order by i limit 1
        "#,
    )
    .bind(&names)
    .fetch_optional(pool)
    .await?;
    if let Some(role) = missing {
        return Err(GrantError::NoSuchRole(inert(&role)));
    }
    let mut tx = pool.begin().await?;
    for statement in statements(duties) {
        sqlx::query(&statement).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// What the connected role lacks of the console's duties (`grants --console`), each said as
/// `select on console_usuario`; empty when it has them all. A role that lacks any would answer 500
/// to every login, so the console checks at start. A table or function that does not exist counts
/// as lacking. Returns the role's name too, for the message.
pub async fn console_lacks(pool: &PgPool) -> Result<(String, Vec<String>), sqlx::Error> {
    // The console's own objects first: they are what another role most likely lacks.
    let tables: Vec<&str> = CONSOLE_TABLES.iter().chain(TABLES).copied().collect();
    let lacking: Vec<String> = sqlx::query_scalar(
        r#"
        select what from (
            select 1 as part, i, 'select on ' || t as what,
                   coalesce(has_table_privilege(to_regclass(t), 'select'), false) as held
            from unnest($1::text[]) with ordinality as u(t, i)
            union all
            select 2, 1, 'update (ultimo_uso) on console_sessao',
                   coalesce(has_column_privilege(to_regclass('console_sessao'), 'ultimo_uso', 'update'), false)
            union all
            select 2, 2, 'delete on console_sessao',
                   coalesce(has_table_privilege(to_regclass('console_sessao'), 'delete'), false)
            union all
            select 3, i, 'execute on function ' || f,
                   coalesce(has_function_privilege(to_regprocedure(f), 'execute'), false)
            from unnest($2::text[]) with ordinality as u(f, i)
        ) p
        where not held
        order by part, i
        "#,
    )
    .bind(&tables)
    .bind(CONSOLE_FUNCTIONS)
    .fetch_all(pool)
    .await?;
    let role: String = sqlx::query_scalar("select current_user::text")
        .fetch_one(pool)
        .await?;
    Ok((role, lacking))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_is_always_quoted_and_a_quote_in_it_is_doubled() {
        let duties = Duties::new("w\"; drop table comissao; --", None, None).unwrap();

        let sql = statements(&duties).join(";\n");

        assert!(
            sql.contains("to \"w\"\"; drop table comissao; --\""),
            "{sql}"
        );
        assert!(!sql.contains("to w"), "{sql}");
    }

    #[test]
    fn names_postgres_would_cut_reserve_or_that_hold_controls_are_refused() {
        for name in [
            "",
            &"r".repeat(64),
            "public",
            "pg_read_all_data",
            "w\u{1b}[2J",
            "w\0",
        ] {
            assert!(
                matches!(Role::new(name), Err(GrantError::InvalidRole { .. })),
                "{name:?}"
            );
        }
        assert!(Role::new(&"r".repeat(63)).is_ok());
        assert!(Role::new("Replay Worker").is_ok());
    }

    #[test]
    fn one_role_cannot_take_two_duties() {
        let err = Duties::new("rl", Some("rl_approver"), Some("rl")).unwrap_err();

        assert!(matches!(err, GrantError::SameRole(r) if r == "rl"));
    }

    #[test]
    fn the_worker_gets_no_approval_insert_no_review_decision_and_no_resolve_function() {
        let duties = Duties::new("w", Some("a"), Some("r")).unwrap();

        let worker: Vec<String> = statements(&duties)
            .into_iter()
            .filter(|s| s.starts_with("grant") && s.ends_with("to \"w\""))
            .collect();

        for s in &worker {
            assert!(!s.contains("efeito_revisao"), "{s}");
            assert!(!s.contains(RESOLVE), "{s}");
            assert!(
                !(s.contains("reprocessamento_aprovacao") && s.contains("insert")),
                "{s}"
            );
        }
    }

    #[test]
    fn the_approver_may_insert_every_approval_column_but_who_approved() {
        let duties = Duties::new("w", Some("a"), None).unwrap();

        let insert = statements(&duties)
            .into_iter()
            .find(|s| s.starts_with("grant insert ("))
            .unwrap();

        assert!(insert.contains("eventos_hash"), "{insert}");
        assert!(!insert.contains("aprovado_por"), "{insert}");
        assert!(insert.ends_with("to \"a\""), "{insert}");
    }

    #[test]
    fn the_console_writes_approvals_and_decisions_only_through_its_functions() {
        let duties = Duties::with_console("w", Some("a"), Some("r"), Some("c")).unwrap();

        let console: Vec<String> = statements(&duties)
            .into_iter()
            .filter(|s| s.starts_with("grant") && s.ends_with("to \"c\""))
            .collect();

        assert!(console.iter().any(|s| s.contains("console_aprovar(")));
        for s in &console {
            assert!(!s.contains(RESOLVE), "{s}");
            assert!(
                !(s.contains("insert") || s.contains("update (") && !s.contains("console_sessao")),
                "{s}"
            );
        }
        assert!(matches!(
            Duties::with_console("w", None, Some("r"), Some("r")),
            Err(GrantError::SameRole(_))
        ));
    }

    #[test]
    fn the_console_asks_for_runs_only_through_its_function_and_the_worker_settles_them() {
        let duties = Duties::with_console("w", None, None, Some("c")).unwrap();
        let sql = statements(&duties);
        let to = |role: &str| -> Vec<&String> {
            sql.iter()
                .filter(|s| s.starts_with("grant") && s.ends_with(&format!("to \"{role}\"")))
                .collect()
        };

        assert!(to("c").iter().any(|s| s.contains("console_solicitar(")));
        assert!(to("w")
            .iter()
            .any(|s| s.starts_with("grant select on execucao_solicitada")));
        // Only the state columns of a request: who asked, for what and with which note stay
        // the console's.
        assert!(to("w").iter().any(|s| s.starts_with(
            "grant update (estado, iniciado_em, concluido_em, resultado) on execucao_solicitada"
        )));
        for s in to("w").iter().chain(&to("c")) {
            assert!(
                !(s.contains("insert") && s.contains("execucao_solicitada")),
                "{s}"
            );
        }
    }

    #[test]
    fn the_script_is_one_transaction() {
        let script = script(&Duties::new("w", None, None).unwrap());

        assert!(
            script.contains("\nbegin;\n") && script.ends_with("commit;\n"),
            "{script}"
        );
    }
}
