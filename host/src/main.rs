fn main() -> std::process::ExitCode {
    stet::cli::main()
}
