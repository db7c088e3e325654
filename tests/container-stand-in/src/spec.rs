//! The command tree of `container` 1.2.2, argument by argument in declaration order (option
//! groups expanded where they are declared), as in `Sources/ContainerCommands` and
//! `Sources/Services/ContainerAPIService/Client/Flags.swift`. The order matters: it decides
//! the usage line, `Did you mean` suggestions and which short names exist.

use crate::args::{flag, opt, opts, pos, ArgDef, CommandSpec, VType};

pub const LIST_FORMATS: &[&str] = &["json", "table", "yaml", "toml"];
pub const PROGRESS_TYPES: &[&str] = &["auto", "none", "ansi", "plain", "color"];

fn debug() -> Vec<ArgDef> {
    vec![flag(
        "debug",
        "--debug",
        "Enable debug output [environment: CONTAINER_DEBUG]",
    )]
}

fn process_flags() -> Vec<ArgDef> {
    vec![
        opts(
            "env",
            "--env -e",
            None,
            "Set environment variables (key=value, or just key to inherit from host)",
        ),
        opts(
            "envFile",
            "--env-file",
            None,
            "Read in a file of environment variables (key=value format, ignores # comments and blank lines)",
        ),
        opt("gid", "--gid", None, "Set the group ID for the process").typed(VType::U32),
        flag(
            "interactive",
            "--interactive -i",
            "Keep the standard input open even if not attached",
        ),
        flag("tty", "--tty -t", "Open a TTY with the process"),
        opt(
            "user",
            "--user -u",
            None,
            "Set the user for the process (format: name|uid[:gid])",
        ),
        opt("uid", "--uid", None, "Set the user ID for the process").typed(VType::U32),
        opt(
            "cwd",
            "-w --workdir --cwd",
            Some("dir"),
            "Set the initial working directory inside the container",
        ),
        opts(
            "ulimits",
            "--ulimit",
            Some("limit"),
            "Set resource limits (format: <type>=<soft>[:<hard>])",
        ),
    ]
}

fn resource_flags() -> Vec<ArgDef> {
    vec![
        opt(
            "cpus",
            "--cpus -c",
            None,
            "Number of CPUs to allocate to the container",
        )
        .typed(VType::I64),
        opt(
            "memory",
            "--memory -m",
            None,
            "Amount of memory (1MiByte granularity), with optional K, M, G, T, or P suffix",
        ),
    ]
}

fn management_flags() -> Vec<ArgDef> {
    vec![
        opt(
            "arch",
            "--arch -a",
            None,
            "Set arch if image can target multiple architectures",
        )
        .default("arm64"),
        opts(
            "capAdd",
            "--cap-add",
            Some("cap"),
            "Add a Linux capability (e.g. CAP_NET_RAW, or ALL)",
        ),
        opts(
            "capDrop",
            "--cap-drop",
            Some("cap"),
            "Drop a Linux capability (e.g. CAP_NET_RAW, or ALL)",
        ),
        opt(
            "cidfile",
            "--cidfile",
            None,
            "Write the container ID to the path provided",
        ),
        flag(
            "detach",
            "--detach -d",
            "Run the container and detach from the process",
        ),
        // Flags.DNS
        opts("dnsNameservers", "--dns", Some("ip"), "DNS nameserver IP address"),
        opt("dnsDomain", "--dns-domain", Some("domain"), "Default DNS domain"),
        opts("dnsOptions", "--dns-option", Some("option"), "DNS options"),
        opts(
            "dnsSearch",
            "--dns-search",
            Some("domain"),
            "DNS search domains",
        ),
        opt(
            "entrypoint",
            "--entrypoint",
            Some("cmd"),
            "Override the entrypoint of the image",
        ),
        flag(
            "useInit",
            "--init",
            "Run an init process inside the container that forwards signals and reaps processes",
        ),
        opt(
            "initImage",
            "--init-image",
            Some("image"),
            "Use a custom init image instead of the default",
        ),
        opt(
            "kernel",
            "--kernel -k",
            Some("path"),
            "Set a custom kernel path",
        ),
        opts(
            "kernelArgs",
            "--kernel-arg",
            Some("arg"),
            "Append a raw boot argument to the kernel command line (repeatable).",
        ),
        opts(
            "labels",
            "-l --label",
            None,
            "Add a key=value label to the container",
        ),
        opts(
            "maskedPaths",
            "--masked-path",
            Some("path"),
            "[EXPERIMENTAL] Hide a path inside the container, in addition to the runtime defaults (or NONE to clear prior values and the defaults)",
        ),
        opts(
            "mounts",
            "--mount",
            None,
            "Add a mount to the container (format: type=<>,source=<>,target=<>,readonly)",
        ),
        opt(
            "name",
            "--name",
            None,
            "Use the specified name as the container ID",
        ),
        opts(
            "networks",
            "--network",
            None,
            "Attach the container to a network (format: <name>[,mac=XX:XX:XX:XX:XX:XX][,mtu=VALUE])",
        ),
        flag(
            "dnsDisabled",
            "--no-dns",
            "Do not configure DNS in the container",
        ),
        opt(
            "os",
            "--os",
            None,
            "Set OS if image can target multiple operating systems",
        )
        .default("linux"),
        opts(
            "publishPorts",
            "-p --publish",
            Some("spec"),
            "Publish a port from container to host (format: [host-ip:]host-port:container-port[/protocol])",
        ),
        opt(
            "platform",
            "--platform",
            None,
            "Platform for the image if it's multi-platform. This takes precedence over --os and --arch [environment: CONTAINER_DEFAULT_PLATFORM]",
        ),
        opts(
            "publishSockets",
            "--publish-socket",
            Some("spec"),
            "Publish a socket from container to host (format: host_path:container_path)",
        ),
        flag(
            "readOnly",
            "--read-only",
            "Mount the container's root filesystem as read-only",
        ),
        opts(
            "readonlyPaths",
            "--read-only-path",
            Some("path"),
            "[EXPERIMENTAL] Mark a path inside the container read-only, in addition to the runtime defaults (or NONE to clear prior values and the defaults)",
        ),
        flag("remove", "--rm --remove", "Remove the container after it stops"),
        flag("rosetta", "--rosetta", "Enable Rosetta in the container"),
        opt(
            "runtime",
            "--runtime",
            None,
            "Set the runtime handler for the container (default: container-runtime-linux)",
        ),
        flag("ssh", "--ssh", "Forward SSH agent socket to container"),
        opt("shmSize", "--shm-size", None, "Size of /dev/shm (e.g. 64M, 1G)"),
        opts(
            "tmpFs",
            "--tmpfs",
            None,
            "Add a tmpfs mount to the container at the given path",
        ),
        flag(
            "virtualization",
            "--virtualization",
            "Expose virtualization capabilities to the container (requires host and guest support)",
        ),
        opts(
            "volumes",
            "--volume -v",
            None,
            "Bind mount a volume into the container",
        ),
    ]
}

fn registry_flags() -> Vec<ArgDef> {
    vec![opt(
        "scheme",
        "--scheme",
        None,
        "Scheme to use when connecting to the container registry. One of (http, https, auto)",
    )
    .default("auto")]
}

fn progress_flags() -> Vec<ArgDef> {
    vec![opt(
        "progress",
        "--progress",
        Some("type"),
        "Progress type (format: auto|none|ansi|plain|color)",
    )
    .typed(VType::Choice(PROGRESS_TYPES))
    .default("auto")]
}

fn image_fetch_flags() -> Vec<ArgDef> {
    vec![opt(
        "maxConcurrentDownloads",
        "--max-concurrent-downloads",
        None,
        "Maximum number of concurrent downloads",
    )
    .typed(VType::Int)
    .default("3")]
}

fn format_flag() -> ArgDef {
    opt("format", "--format", None, "Format of the output")
        .typed(VType::Choice(LIST_FORMATS))
        .default("table")
}

fn cmd(
    name: &'static str,
    aliases: &'static [&'static str],
    abstract_: &'static str,
    groups: Vec<Vec<ArgDef>>,
) -> CommandSpec {
    CommandSpec {
        name,
        aliases,
        abstract_,
        args: groups.into_iter().flatten().collect(),
        subcommands: vec![],
        unimplemented: &[],
        default_subcommand: false,
    }
}

pub fn tree() -> CommandSpec {
    let run = cmd(
        "run",
        &[],
        "Run a container",
        vec![
            process_flags(),
            resource_flags(),
            management_flags(),
            registry_flags(),
            progress_flags(),
            image_fetch_flags(),
            debug(),
            vec![
                pos("image", "image", "Image name"),
                pos("arguments", "arguments", "Container init process arguments")
                    .optional()
                    .passthrough(),
            ],
        ],
    );
    let create = cmd(
        "create",
        &[],
        "Create a new container",
        vec![
            process_flags(),
            resource_flags(),
            management_flags(),
            registry_flags(),
            image_fetch_flags(),
            debug(),
            vec![
                pos("image", "image", "Image name"),
                pos("arguments", "arguments", "Container init process arguments")
                    .optional()
                    .passthrough(),
            ],
        ],
    );
    let start = cmd(
        "start",
        &[],
        "Start a container",
        vec![
            vec![
                flag("attach", "--attach -a", "Attach stdout/stderr"),
                flag("interactive", "--interactive -i", "Attach stdin"),
            ],
            debug(),
            vec![pos("containerId", "container-id", "Container ID")],
        ],
    );
    let exec = cmd(
        "exec",
        &[],
        "Run a new command in a running container",
        vec![
            process_flags(),
            debug(),
            vec![
                flag(
                    "detach",
                    "--detach -d",
                    "Run the process and detach from it",
                ),
                pos("containerId", "container-id", "Container ID"),
                pos("arguments", "arguments", "New process arguments").passthrough(),
            ],
        ],
    );
    let stop = cmd(
        "stop",
        &[],
        "Stop one or more running containers",
        vec![
            vec![
                flag("all", "--all -a", "Stop all running containers"),
                opt(
                    "signal",
                    "--signal -s",
                    None,
                    "Signal to send to the containers",
                ),
                opt(
                    "time",
                    "--time -t",
                    None,
                    "Seconds to wait before killing the containers",
                )
                .typed(VType::I32)
                .default("5"),
            ],
            debug(),
            vec![pos("containerIds", "container-ids", "Container IDs")
                .optional()
                .repeating()],
        ],
    );
    let kill = cmd(
        "kill",
        &[],
        "Kill or signal one or more running containers",
        vec![
            vec![
                flag("all", "--all -a", "Kill or signal all running containers"),
                opt(
                    "signal",
                    "--signal -s",
                    None,
                    "Signal to send to the container(s)",
                )
                .default("KILL"),
            ],
            debug(),
            vec![pos("containerIds", "container-ids", "Container IDs")
                .optional()
                .repeating()],
        ],
    );
    let delete = cmd(
        "delete",
        &["rm"],
        "Delete one or more containers",
        vec![
            vec![
                flag("all", "--all -a", "Delete all containers"),
                flag(
                    "force",
                    "--force -f",
                    "Delete containers even if they are running",
                ),
            ],
            debug(),
            vec![pos("containerIds", "container-ids", "Container IDs")
                .optional()
                .repeating()],
        ],
    );
    let list = cmd(
        "list",
        &["ls"],
        "List running containers",
        vec![
            vec![
                flag("all", "--all -a", "Include containers that are not running"),
                format_flag(),
                flag("quiet", "--quiet -q", "Only output the container ID"),
            ],
            debug(),
        ],
    );
    let inspect = cmd(
        "inspect",
        &[],
        "Display information about one or more containers",
        vec![
            debug(),
            vec![pos("containerIds", "container-ids", "Container IDs to inspect").repeating()],
        ],
    );
    let logs = cmd(
        "logs",
        &[],
        "Fetch container logs",
        vec![
            vec![
                flag(
                    "boot",
                    "--boot",
                    "Display the boot log for the container instead of stdio",
                ),
                flag("follow", "--follow -f", "Follow log output"),
                opt(
                    "numLines",
                    "-n",
                    None,
                    "Number of lines to show from the end of the logs. If not provided this will print all of the logs",
                )
                .typed(VType::Int),
            ],
            debug(),
            vec![pos("containerId", "container-id", "Container ID")],
        ],
    );

    let image_list = cmd(
        "list",
        &["ls"],
        "List images",
        vec![
            vec![
                format_flag(),
                flag("quiet", "--quiet -q", "Only output the image name"),
                flag("verbose", "--verbose -v", "Verbose output"),
            ],
            debug(),
        ],
    );
    let image_inspect = cmd(
        "inspect",
        &[],
        "Display information about one or more images",
        vec![
            debug(),
            vec![pos("images", "images", "Images to inspect").repeating()],
        ],
    );
    let image_pull = cmd(
        "pull",
        &[],
        "Pull an image",
        vec![
            registry_flags(),
            progress_flags(),
            image_fetch_flags(),
            vec![
                opt(
                    "arch",
                    "--arch -a",
                    None,
                    "Limit the pull to the specified architecture",
                ),
                opt("os", "--os", None, "Limit the pull to the specified OS"),
                opt(
                    "platform",
                    "--platform",
                    None,
                    "Limit the pull to the specified platform (format: os/arch[/variant], takes precedence over --os and --arch) [environment: CONTAINER_DEFAULT_PLATFORM]",
                ),
            ],
            debug(),
            vec![pos("reference", "reference", "")],
        ],
    );
    let image_load = cmd(
        "load",
        &[],
        "Load images from an OCI compatible tar archive",
        vec![
            vec![
                opt("input", "--input -i", None, "Path to the image tar archive"),
                flag(
                    "force",
                    "--force -f",
                    "Load images even if the archive contains invalid files",
                ),
            ],
            debug(),
        ],
    );
    let mut image = cmd("image", &["i"], "Manage images", vec![debug()]);
    image.subcommands = vec![image_inspect, image_list, image_load, image_pull];
    image.unimplemented = &["delete", "rm", "prune", "push", "save", "tag"];

    let system_start = cmd(
        "start",
        &[],
        "Start `container` services",
        vec![
            vec![
                opt(
                    "appRoot",
                    "--app-root -a",
                    None,
                    "Path to the root directory for application data",
                ),
                opt(
                    "installRoot",
                    "--install-root",
                    None,
                    "Path to the root directory for application executables and plugins",
                ),
                opt(
                    "logRoot",
                    "--log-root",
                    None,
                    "Path to the root directory for log data, using macOS log facility if not set",
                ),
                flag(
                    "kernelInstall",
                    "--enable-kernel-install",
                    "Specify whether the default kernel should be installed or not (default: prompt user)",
                ),
                flag(
                    "kernelInstall",
                    "--disable-kernel-install",
                    "Specify whether the default kernel should be installed or not (default: prompt user)",
                )
                .sets(false),
                opt(
                    "timeout",
                    "--timeout",
                    None,
                    "Number of seconds to wait for API service to become responsive",
                )
                .typed(VType::Seconds),
            ],
            debug(),
        ],
    );
    let system_status = cmd(
        "status",
        &[],
        "Show the status of `container` services",
        vec![
            vec![
                opt("prefix", "--prefix -p", None, "Launchd prefix for services")
                    .default("com.apple.container."),
                format_flag(),
            ],
            debug(),
        ],
    );
    let system_stop = cmd(
        "stop",
        &[],
        "Stop all `container` services",
        vec![
            vec![
                opt("prefix", "--prefix -p", None, "Launchd prefix for services")
                    .default("com.apple.container."),
            ],
            debug(),
        ],
    );
    let system_version = cmd(
        "version",
        &[],
        "Show version information",
        vec![vec![format_flag()], debug()],
    );
    let mut system = cmd("system", &["s"], "Manage system components", vec![debug()]);
    system.subcommands = vec![system_start, system_status, system_stop, system_version];
    system.unimplemented = &["df", "dns", "kernel", "logs", "property"];

    let mut help = cmd(
        "help",
        &[],
        "",
        vec![vec![pos("subcommandPath", "subcommand-path", "")
            .optional()
            .passthrough()]],
    );
    help.args.insert(
        0,
        ArgDef {
            hidden: true,
            ..debug().remove(0)
        },
    );

    let mut root = cmd(
        "container",
        &[],
        "A container platform for macOS",
        vec![debug()],
    );
    root.subcommands = vec![
        help, create, delete, exec, inspect, kill, list, logs, run, start, stop, image, system,
    ];
    root.unimplemented = &[
        "copy", "cp", "export", "stats", "prune", "build", "registry", "machine", "volume",
        "builder", "network",
    ];
    root.default_subcommand = true;
    root
}
