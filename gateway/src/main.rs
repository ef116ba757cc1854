fn main() {
    std::process::exit(ankusa_gateway::cli::main());
}
