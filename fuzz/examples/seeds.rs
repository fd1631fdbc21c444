//! Writes every target's seeds into `DIR/<target>/` (the corpus folders cargo-fuzz reads), each
//! named by its content's hash, so writing them again adds nothing.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: seeds DIR (the corpus folder, fuzz/corpus)");
        return ExitCode::from(2);
    };
    for (target, _) in wal_fuzz::TARGETS {
        let folder = dir.join(target);
        if let Err(e) = std::fs::create_dir_all(&folder) {
            eprintln!("seeds: cannot create {}: {e}", folder.display());
            return ExitCode::FAILURE;
        }
        for seed in wal_fuzz::seeds(target) {
            let name = format!("seed-{:016x}", wal_namespaces::key_hash(&seed));
            if let Err(e) = std::fs::write(folder.join(&name), &seed) {
                eprintln!("seeds: cannot write {}/{name}: {e}", folder.display());
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
