package scontrol

// helpText is scontrol --help (and `scontrol help`) in the layout of
// Slurm's: the usage line, the options, then "Valid <COMMAND> values
// are:", which scripts and Slurm's test suite look for. The words are
// Tide's: what Tide's scontrol does.
const helpText = `scontrol [<OPTION>] [<COMMAND>]
    Valid <OPTION> values are:
     -a or --all: show all partitions (Tide hides none)
     -d or --details: show more details (GPU indices and per-node CPUs)
     -F or --future: show nodes in the FUTURE state too (Tide has none)
     -h or --help: print this description of use
     --json: print show job|node|partition|steps|licenses|reservations
             and ping as JSON, in Slurm's data_parser layout
     -o or --oneliner: print one record per line
     -Q or --quiet: print no messages other than error messages
     -V or --version: print the Slurm release the commands behave as

  Valid <COMMAND> values are:
     help                     print this description of use
     hold <job_list>          keep pending jobs from starting (user hold
                              for their owner, else admin hold)
     uhold <job_list>         hold pending jobs so that their owner may
                              release them
     release <job_list>       release held jobs
     requeue <job_list>       put jobs back into the queue
     ping                     ask whether the controller answers
     reconfigure              re-read the controller's configuration file
                              and apply it without a restart (operators)
     show <ENTITY> [<ID>]     display the state of the entity with ID, or
                              of all of them
     update <SPECIFICATIONS>  change a job (JobId=) or node (NodeName=)
     version                  print the Slurm release the commands behave as

  <ENTITY> may be "config", "hostnames", "hostlist", "hostlistsorted",
  "job", "licenses", "node", "partition", "reservation" or "step" (both
  singular and plural forms, unambiguous abbreviations accepted).

  <ID> is a job id ("7", "7_3" for a task of array 7), a step id
  ("7.0"), a node list ("gpu[01-04]") or a partition name.

  <SPECIFICATIONS> for a job: JobId=<job_list> and any of TimeLimit=,
  Name=, Comment=, Partition=, Priority=, Nice=, Account=, Dependency=,
  ArrayTaskThrottle=; for nodes: NodeName=<node_list> State=DRAIN|DOWN|
  RESUME|UNDRAIN [Reason="..."].

  Slurm commands Tide does not have (each answers "not supported by
  Tide"): abort, cancel_reboot, create, delete, listpids, notify, power,
  reboot, requeuehold, resume, setdebug, shutdown, suspend, takeover,
  token (see tide token), top, wait_job, write.

  Commands and entities are case-insensitive and may be abbreviated.
`
