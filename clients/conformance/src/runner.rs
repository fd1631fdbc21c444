//! One case through a library's runner: the plan on its standard input, its result lines read
//! as they come, and the case's actions taken meanwhile.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::Command;

use crate::case::Case;
use crate::stage::Stage;

/// How long one case's runner may take.
const CASE_LIMIT: Duration = Duration::from_secs(120);

/// `clients/<library>/conformance-runner`.
pub fn runner_of(library: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(library)
        .join("conformance-runner")
}

/// The case's steps with the stage's namespace names for its aliases.
pub fn plan(case_name: &str, case: &Case, stage: &Stage) -> Value {
    let steps: Vec<Value> = case
        .steps
        .iter()
        .map(|step| {
            let mut step = step.clone();
            if let Some(alias) = step.get("namespace").and_then(Value::as_str) {
                let key = (case_name.to_owned(), alias.to_owned());
                if let Some(namespace) = stage.namespaces.get(&key) {
                    step["namespace"] = Value::String(namespace.name.clone());
                }
            }
            step
        })
        .collect();
    if case.secured {
        return serde_json::json!({
            "producers": [stage.secured.address],
            "tls": stage.tls,
            "steps": steps,
        });
    }
    serde_json::json!({"producers": stage.live_producers(), "steps": steps})
}

/// Runs the plan; returns the result lines, or why the runner failed.
pub async fn run(
    library: &str,
    case: &Case,
    plan: &Value,
    stage: &mut Stage,
) -> Result<Vec<Value>, String> {
    let runner = runner_of(library);
    let mut child = Command::new(&runner)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            format!(
                "cannot start {} (did clients/{library}/build run?): {e}",
                runner.display()
            )
        })?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    stdin
        .write_all(plan.to_string().as_bytes())
        .await
        .map_err(|e| format!("writing the plan: {e}"))?;
    drop(stdin);
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let mut lines = BufReader::new(stdout).lines();
    let mut results = Vec::new();
    let read = async {
        while let Some(line) = lines
            .next_line()
            .await
            .map_err(|e| format!("reading the runner: {e}"))?
        {
            let value: Value = serde_json::from_str(&line)
                .map_err(|e| format!("the runner printed a line that is not JSON ({e}): {line}"))?;
            results.push(value);
            for action in case
                .during
                .iter()
                .filter(|a| a.after_results == results.len())
            {
                stage.kill(action.kill_producer).await;
            }
        }
        Ok::<_, String>(())
    };
    tokio::time::timeout(CASE_LIMIT, read)
        .await
        .map_err(|_| format!("the runner did not finish within {CASE_LIMIT:?}"))??;
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .map_err(|_| "the runner did not exit after its last line".to_owned())?
        .map_err(|e| e.to_string())?;
    let errors = errors.await.unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "the runner exited with {status}; its standard error:\n{errors}"
        ));
    }
    Ok(results)
}
