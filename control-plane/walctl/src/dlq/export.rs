//! `walctl dlq export`: the control plane's ExportDeadLetters stream written as JSON lines.

use std::io::Write as _;
use std::path::Path;
use std::time::SystemTime;

use serde_json::json;
use wal_proto::v1::ExportDeadLettersRequest;

use super::filter::FilterArgs;
use super::print::detail_json;
use crate::Failure;
use crate::namespace::refused;
use crate::output::{Format, print_json};

pub async fn run(
    address: &str,
    namespace: &str,
    filter: &FilterArgs,
    file: &Path,
    format: Format,
) -> Result<(), Failure> {
    let filter = filter.filter(SystemTime::now())?;
    let to_stdout = file == Path::new("-");
    let asked = format!("exporting the DLQs of '{namespace}'");
    let mut stream = crate::operations::client(address)
        .await?
        .export_dead_letters(ExportDeadLettersRequest {
            namespace: namespace.to_owned(),
            filter: Some(filter.to_proto()),
            operator: std::env::var("USER").unwrap_or_else(|_| "walctl".to_owned()),
        })
        .await
        .map_err(|status| refused(&status, &asked))?
        .into_inner();
    // Written to a file beside the one asked for (its name and ".partial"), renamed when
    // whole: a failed export leaves no file that looks complete.
    let mut partial = file.as_os_str().to_owned();
    partial.push(".partial");
    let partial = std::path::PathBuf::from(partial);
    let mut out: Box<dyn std::io::Write> = if to_stdout {
        Box::new(std::io::stdout().lock())
    } else {
        let created = std::fs::File::create(&partial)
            .map_err(|e| Failure::usage(format!("cannot write {}: {e}", partial.display())))?;
        Box::new(std::io::BufWriter::new(created))
    };
    let mut exported = 0u64;
    let written = |e: std::io::Error| Failure::usage(format!("writing {}: {e}", file.display()));
    while let Some(letter) = stream
        .message()
        .await
        .map_err(|status| refused(&status, &format!("{asked} after {exported}")))?
    {
        let line = serde_json::to_string(&detail_json(&letter)).unwrap_or_default();
        writeln!(out, "{line}").map_err(written)?;
        exported += 1;
    }
    out.flush().map_err(written)?;
    drop(out);
    if !to_stdout {
        std::fs::rename(&partial, file).map_err(|e| {
            Failure::usage(format!(
                "moving {} to {}: {e}",
                partial.display(),
                file.display()
            ))
        })?;
    }
    match format {
        Format::Json if !to_stdout => print_json(&json!({
            "namespace": namespace,
            "exported": exported,
            "file": file.display().to_string(),
        })),
        _ => eprintln!("walctl: exported {exported} dead letters of '{namespace}'"),
    }
    Ok(())
}
