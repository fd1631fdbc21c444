//! One pod of a plan made local: its files, its environment (each variable one its binary reads),
//! its ports. `running` starts it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::local::{Stack, rewrite_paths, say};
use crate::{Env, Mount, Pod};

/// A free loopback port for each container port of each pod, by Deployment.
pub fn free_ports(pods: &[Pod]) -> Result<BTreeMap<String, BTreeMap<u16, u16>>> {
    Ok(pods
        .iter()
        .map(|pod| {
            let ports = pod
                .ports
                .values()
                .map(|&port| (port, wal_testkit::refusing_address().port()))
                .collect();
            (pod.deployment.clone(), ports)
        })
        .collect())
}

/// What to run: the binary, its arguments and its whole environment.
pub struct Spec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// Makes the pod's folders and environment local, and checks each variable is one its binary
/// reads.
pub fn prepare(
    stack: &Stack,
    pod: &Pod,
    config_maps: &BTreeMap<String, BTreeMap<String, String>>,
    services: &BTreeMap<String, u16>,
    ports: &BTreeMap<u16, u16>,
    dir: &Path,
) -> Result<Spec> {
    let program = binary(pod)?;
    let mounts = local_mounts(pod, dir);
    for (mount, (_, local)) in pod.mounts.iter().zip(&mounts) {
        std::fs::create_dir_all(local).with_context(|| format!("making {}", local.display()))?;
        for (key, text) in mount_files(stack, mount, config_maps, &mounts)? {
            std::fs::write(local.join(&key), text)
                .with_context(|| format!("writing {key} under {}", local.display()))?;
        }
    }
    let read = known_variables(&program)?;
    let mut env = Vec::new();
    for variable in &pod.env {
        let name = &variable.name;
        if name.starts_with("WAL_") && !read.contains(name) {
            bail!(
                "the chart sets {name}, which {} does not read (its --help names no such variable)",
                program.display()
            );
        }
        let value = variable_value(stack, variable, config_maps)?;
        let local = local_value(stack, name, &value, services, ports, &mounts)?;
        if local != value {
            say(&format!("{}: {name}={value} -> {local}", pod.deployment));
        }
        env.push((name.clone(), local));
    }
    // Arguments get the same treatment as values: a path or a Service's address in one is the
    // container's, not this machine's.
    let mut args = Vec::new();
    for arg in pod.command[1..].iter().chain(pod.args.iter().flatten()) {
        args.push(local_value(stack, "", arg, services, ports, &mounts)?);
    }
    Ok(Spec { program, args, env })
}

/// Each mount's path in the container and the folder under `dir` that stands for it here.
fn local_mounts(pod: &Pod, dir: &Path) -> Vec<(String, PathBuf)> {
    pod.mounts
        .iter()
        .map(|m| {
            (
                m.path.clone(),
                dir.join("fs").join(m.path.trim_start_matches('/')),
            )
        })
        .collect()
}

/// The files a mount holds, by key: a ConfigMap's with its paths made local, a Secret's, none.
fn mount_files(
    stack: &Stack,
    mount: &Mount,
    config_maps: &BTreeMap<String, BTreeMap<String, String>>,
    mounts: &[(String, PathBuf)],
) -> Result<Vec<(String, String)>> {
    Ok(if let Some(name) = &mount.config_map {
        let data = config_maps.get(name).with_context(|| {
            format!(
                "mount {}: the chart renders no ConfigMap {name}",
                mount.path
            )
        })?;
        let mut files = Vec::new();
        for (key, text) in data {
            files.push((key.clone(), rewrite_paths(text, mounts)));
        }
        files
    } else if let Some(name) = &mount.secret {
        stack.secret(name)?
    } else if mount.empty_dir {
        Vec::new()
    } else {
        bail!(
            "mount {}: neither a ConfigMap, a Secret nor an emptyDir",
            mount.path
        );
    })
}

/// A variable's value as the chart gives it: literal, or read from a Secret or a ConfigMap.
fn variable_value(
    stack: &Stack,
    variable: &Env,
    config_maps: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<String> {
    let name = &variable.name;
    Ok(if let Some(value) = &variable.value {
        value.clone()
    } else if let Some(secret) = &variable.secret {
        stack
            .secret(&secret.name)?
            .into_iter()
            .find(|(key, _)| *key == secret.key)
            .map(|(_, value)| value)
            .with_context(|| format!("{name}: Secret {} has no key {}", secret.name, secret.key))?
    } else if let Some(map) = &variable.config_map {
        config_maps
            .get(&map.name)
            .and_then(|data| data.get(&map.key))
            .cloned()
            .with_context(|| {
                format!(
                    "{name}: the chart renders no ConfigMap key {}/{}",
                    map.name, map.key
                )
            })?
    } else {
        bail!("{name}: no value, Secret or ConfigMap");
    })
}

/// A variable's value with the stack's addresses, free ports and the pod's folders.
fn local_value(
    stack: &Stack,
    name: &str,
    value: &str,
    services: &BTreeMap<String, u16>,
    ports: &BTreeMap<u16, u16>,
    mounts: &[(String, PathBuf)],
) -> Result<String> {
    if let Some(addresses) = stack.address_variable(name)? {
        return Ok(addresses);
    }
    if let Some(port) = value.strip_prefix("0.0.0.0:") {
        let port: u16 = port
            .parse()
            .with_context(|| format!("{name}={value}: not a port"))?;
        let local = ports
            .get(&port)
            .with_context(|| format!("{name}={value}: the container declares no port {port}"))?;
        return Ok(format!("127.0.0.1:{local}"));
    }
    let mut value = value.to_owned();
    for (service, port) in services {
        value = replace_address(&value, service, &format!("127.0.0.1:{port}"));
    }
    Ok(rewrite_paths(&value, mounts))
}

/// `value` with each URL authority `//ADDRESS` (not followed by more digits) made `//LOCAL`.
fn replace_address(value: &str, address: &str, local: &str) -> String {
    let needle = format!("//{address}");
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find(&needle) {
        let after = &rest[at + needle.len()..];
        out.push_str(&rest[..at]);
        if after.starts_with(|c: char| c.is_ascii_digit()) {
            out.push_str(&needle);
        } else {
            out.push_str("//");
            out.push_str(local);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The binary the pod's command names, from this build.
fn binary(pod: &Pod) -> Result<PathBuf> {
    let command = pod.command.first().context("no command")?;
    let beside = std::env::current_exe()?
        .parent()
        .context("the runner's folder")?
        .join(command);
    if !beside.exists() {
        bail!(
            "the chart runs {command}, which this build has no binary of (looked for {})",
            beside.display()
        );
    }
    Ok(beside)
}

/// The variables a binary reads: those its --help lists as `[env: NAME=`.
fn known_variables(program: &Path) -> Result<BTreeSet<String>> {
    let help = Command::new(program)
        .arg("--help")
        .output()
        .with_context(|| format!("running {} --help", program.display()))?;
    let text = String::from_utf8_lossy(&help.stdout);
    Ok(text
        .split("[env: ")
        .skip(1)
        .filter_map(|rest| rest.split(['=', ']']).next())
        .map(str::to_owned)
        .collect())
}
