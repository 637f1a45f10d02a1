//! The jobs of the jobs directory that `serve` fires on a schedule, as `status` lists them: the
//! schedule, the next fire in the job's timezone and the last run (a verify job's says how many
//! days differed).

use maud::{html, Markup};

use super::{segment, Inert};
use crate::services::report::render::state_label;
use crate::services::scheduler::status::JobStatus;

/// The section of the executions list; nothing when no job has a schedule.
pub(in crate::edges::console) fn section(jobs: &[JobStatus], tz: chrono_tz::Tz) -> Markup {
    let scheduled: Vec<&JobStatus> = jobs.iter().filter(|j| j.schedule.is_some()).collect();
    html! {
        @if !scheduled.is_empty() {
            section #scheduled {
                h2 { "Jobs agendados" }
                p { "O que o " code { "replay-ledger serve" } " dispara sozinho, com a próxima vez e o resultado da última (o de um job de verificação diz quantos dias diferem)." }
                div.scroll { table.data {
                    thead { tr { th { "Job" } th { "Tipo" } th { "Agenda" } th { "Próxima" } th { "Última" } th { "Resultado" } } }
                    tbody { @for j in &scheduled { tr {
                        td { (Inert(&j.name)) }
                        td { code { (j.kind) } }
                        td { code { (Inert(j.schedule.as_deref().unwrap_or("-"))) } }
                        td { (j.next_fire.map_or("-".into(), |t| super::time(t.with_timezone(&chrono::Utc), tz))) }
                        @match &j.last_run {
                            None => { td { "nunca rodou" } td { "-" } }
                            Some(run) => {
                                td {
                                    @if let Some(key) = &run.execution {
                                        a href={ "/executions/" (segment(key)) } { (state_label(run.state)) }
                                    } @else { (state_label(run.state)) }
                                    " · " (super::time(run.started_at, tz))
                                }
                                td { (Inert(&run.detail.as_ref().map_or_else(|| run.error.clone().unwrap_or_else(|| "-".into()), |d| d.portuguese()))) }
                            }
                        }
                    } } }
                } }
            }
        }
    }
}
