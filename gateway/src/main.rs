// mimalloc: the ingest path allocates per request (headers, envelope, batch); it is
// measurably cheaper than glibc malloc under the group-commit load (docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(ankusa_gateway::cli::main());
}
