//! Compiles proto/ in pure Rust (protox), so building the platform needs no protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "wal/v1/write.proto",
        "wal/v1/entry.proto",
        "wal/v1/target.proto",
        "wal/v1/control.proto",
        "wal/v1/operations.proto",
        "wal/v1/writer.proto",
        "wal/v1/transaction.proto",
    ];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["."])?;
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    // The descriptor set is embedded so the producer can serve gRPC reflection (grpcurl works
    // without the .proto files).
    std::fs::write(
        out_dir.join("wal_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
