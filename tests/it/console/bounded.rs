//! Work per request is bounded: the list of messages an approval will send, as a spreadsheet of
//! a 300,000-event window, is written as the window is read, in constant memory — the console's
//! peak resident memory stays under 100 MB (it held the whole list and the whole workbook, 719 MB).

use super::*;

/// The console process's peak resident set (VmHWM), in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[tokio::test]
async fn the_messages_spreadsheet_of_a_300_000_event_window_is_written_in_bounded_memory() {
    const EVENTS: i64 = 300_000;
    let db = TestDb::new().await;
    sqlx::query(
        r#"
        insert into evento_arquivado (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em)
        select i, 'evt-' || i, 'pedido.pago', 'ped-' || i, 1,
               jsonb_build_object('valorCentavos', 1000 + i, 'percentual', 5),
               $1::timestamptz + i * interval '200 milliseconds'
        from generate_series(1, $2::bigint) as i
        "#,
    )
    .bind(day_start())
    .bind(EVENTS)
    .execute(&db.pool)
    .await
    .expect("archive the window");
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            batch_size: 5_000,
            extra: "require_approved_simulation: true\n".into(),
            ..JobSpec::default()
        },
    );
    run_job(&db, jobs.path(), JOB, Some(true), false)
        .await
        .expect("the simulation");
    add_user(&db.url, jobs.path(), FINANCE, "finance").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let pid = console.child.id().expect("the console runs");
    let finance = Client::logged_in(&console, FINANCE).await;

    let asked = std::time::Instant::now();
    let response = finance
        .request(
            reqwest::Method::GET,
            &format!("/executions/{JOB}:simulacao/effects.xlsx"),
        )
        // The tests' debug build on a busy CI machine takes its time; memory is what is measured.
        .timeout(std::time::Duration::from_secs(240))
        .send()
        .await
        .expect("GET effects.xlsx");
    let status = response.status();
    let bytes = response.bytes().await.expect("the workbook");
    let peak = peak_kib(pid);
    eprintln!(
        "console peak resident memory: {} MiB; the download took {:?}",
        peak / 1024,
        asked.elapsed()
    );

    assert_eq!(status, 200);
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes.to_vec())).expect("a zip");
    let mut sheet = String::new();
    std::io::Read::read_to_string(
        &mut zip.by_name("xl/worksheets/sheet1.xml").expect("the sheet"),
        &mut sheet,
    )
    .expect("read the sheet");
    assert!(
        sheet.contains(&format!("<row r=\"{}\"", EVENTS + 1)),
        "a row per message after the header"
    );
    assert!(
        peak < 100 * 1024,
        "the console's peak resident memory was {} MiB",
        peak / 1024
    );
}
