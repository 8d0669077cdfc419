# SPDX-License-Identifier: LGPL-2.1-or-later
# fish completion for elidectl(1): commands, options, --json=MODE, the
# columns -o takes, the pids of processes running with libelide and their
# lock names (asked from elidectl itself), the programs elided learned
# about for forget, services for enable --unit.

set -l __elidectl_commands status list show top candidates set reset reload learned forget check-config hw run enable disable

# The -H / --runtime-dir options on the command line, to pass on.
function __elidectl_source_opts
    set -l tokens (commandline -opc)
    set -l out
    for i in (seq 2 (count $tokens))
        switch $tokens[$i]
            case -H --host --runtime-dir
                set -l next (math $i + 1)
                if test $next -le (count $tokens)
                    set -a out $tokens[$i] $tokens[$next]
                end
            case '--host=*' '--runtime-dir=*'
                set -a out $tokens[$i]
        end
    end
    printf '%s\n' $out
end

function __elidectl_pids
    command -q elidectl; or return
    elidectl (__elidectl_source_opts) list --json=short 2>/dev/null | string match -ar '"pid":[0-9]+' | string replace '"pid":' ''
end

# Whether a pid was given (top PID shows locks, not processes).
function __elidectl_has_pid
    for t in (commandline -opc)[2..-1]
        string match -qr '^[0-9]+$' -- $t; and return 0
    end
    return 1
end

# The lock names of the pid given after set/reset.
function __elidectl_locks
    set -l tokens (commandline -opc)
    set -l pid
    for t in $tokens[2..-1]
        if string match -qr '^[0-9]+$' -- $t
            set pid $t
            break
        end
    end
    test -n "$pid"; or return
    command -q elidectl; or return
    elidectl (__elidectl_source_opts) show $pid --json=short 2>/dev/null | string match -ar '"name":"[^"(]*"' | string replace -r '"name":"([^"]*)"' '$1' | sort -u
end

# The executables elided keeps learned decisions of (the caller's own).
function __elidectl_learned_exes
    command -q elidectl; or return
    elidectl (__elidectl_source_opts) learned --json=short 2>/dev/null | string match -ar '"exe":"[^"]*"' | string replace -r '"exe":"([^"]*)"' '$1' | sort -u
end

function __elidectl_services
    command -q systemctl; or return
    systemctl list-unit-files --type=service --no-legend 2>/dev/null | string replace -r ' .*' ''
end

# The columns of the command on the line, with what was typed before the last comma.
function __elidectl_columns
    set -l cols PID USER UID EXE/UNIT COMM MODE STATE LOCKS ACQUIRED/s COMMITS/s ABORT% CYCLES-LOST/s
    if __fish_seen_subcommand_from list
        set cols PID USER EXE COMM UNIT STATE MODE LOCKS ACQUIRED/s COMMITS/s ABORT% CYCLES-LOST CYCLES-LOST/s UID
    else if __fish_seen_subcommand_from show
        set cols INDEX LOCK KIND CALL-SITE ACQUIRED ELIDED% COMMIT% ABORTS CONFLICT CAPACITY BUSY EXPLICIT RETRY DEBUG NESTED OTHER FALLBACK CONTENDED CYCLES-LOST STATE
    else if __fish_seen_subcommand_from learned
        set cols USER UID PROGRAM LOCK VERDICT RUNS ACQUIRED ATTEMPTS COMMITS COMMIT% ABORTS AGE UPDATED
    else if __fish_seen_subcommand_from top; and __elidectl_has_pid
        set cols INDEX LOCK KIND ACQUIRED/s CONTENDED/s WAIT/s HOLD COMMITS/s ABORT% TREND
    end
    set -l cur (commandline -ct | string replace -r '^(-o|--output=)' '')
    set -l done (string match -r '^.*,' -- $cur)
    for c in $cols
        printf '%s%s\n' "$done" $c
    end
end

complete -c elidectl -f
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a status -d "elided, the hardware, totals and the busiest processes"
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a list -d "One line per process running with libelide"
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a show -d "A process's elision state and per-lock statistics"
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a top -d "Processes (or a process's locks) by current rates, redrawn every interval"
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a candidates -d "The locks processes wait for most, with advice"
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a set -d "Override the mode of a process or one lock"
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a reset -d "Drop the overrides of a process or one lock"
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a reload -d "Make elided re-read its configuration"
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a learned -d "What elided learned about programs' locks in earlier runs"
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a forget -d "Make elided forget what it learned"
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a check-config -d "Validate a configuration"
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a hw -d "TSX/RTM report and advice for this machine"
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a run -d "Run a command with libelide preloaded"
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a enable -d "Preload libelide into a service or every program"
complete -c elidectl -n "not __fish_seen_subcommand_from $__elidectl_commands" -a disable -d "Undo enable"

# Global options.
complete -c elidectl -s h -l help -d "Show the help"
complete -c elidectl -l version -d "Show the version"
complete -c elidectl -l json -x -a "pretty short" -d "JSON output (--json=MODE)"
complete -c elidectl -l no-legend -d "No column headers, footer or process header"
complete -c elidectl -l no-pager -d "Do not pipe the output into a pager"
complete -c elidectl -l no-color -d "No colours"
complete -c elidectl -s l -l full -d "Do not ellipsise cells to fit the terminal"
complete -c elidectl -s o -l output -x -a "(__elidectl_columns)" -d "The table's columns"
complete -c elidectl -s H -l host -x -a "(__fish_print_hostnames)" -d "Talk to elided on HOST over ssh"
complete -c elidectl -l runtime-dir -x -a "(__fish_complete_directories)" -d "Read the segments in DIR directly"
complete -c elidectl -l lock -x -a "(__elidectl_locks)" -d "set, reset: one lock"
complete -c elidectl -l sort -x -n "__fish_seen_subcommand_from top; and not __elidectl_has_pid" -a "acquired commits aborts cycles" -d "Order by"
complete -c elidectl -l sort -x -n "__fish_seen_subcommand_from top; and __elidectl_has_pid" -a "acquired wait commits aborts" -d "Order by"
complete -c elidectl -l sort -x -n "not __fish_seen_subcommand_from top" -a "name acquired commits aborts conflict capacity cycles wait" -d "Order by"
complete -c elidectl -l max -x -d "show, top PID: at most N locks"
complete -c elidectl -l history -n "__fish_seen_subcommand_from show" -d "show PID: the rates elided kept of its last intervals"
complete -c elidectl -s v -l verbose -d "Say what was skipped"

# Arguments of the commands.
complete -c elidectl -n "__fish_seen_subcommand_from show set reset top; and not __fish_seen_subcommand_from (__elidectl_pids)" -x -a "(__elidectl_pids)" -d "Process with libelide"
complete -c elidectl -n "__fish_seen_subcommand_from set; and __fish_seen_subcommand_from (__elidectl_pids)" -x -a "off on adaptive watch"
complete -c elidectl -n "__fish_seen_subcommand_from forget" -x -a "(__elidectl_learned_exes)" -d "Program elided learned about"
complete -c elidectl -n "__fish_seen_subcommand_from check-config" -F
complete -c elidectl -n "__fish_seen_subcommand_from run" -l mode -x -a "off on adaptive watch" -d "libelide's mode"
complete -c elidectl -n "__fish_seen_subcommand_from run" -x -a "(__fish_complete_subcommand --fcs-skip=2)"
complete -c elidectl -n "__fish_seen_subcommand_from enable disable" -l unit -x -a "(__elidectl_services)" -d "A service"
complete -c elidectl -n "__fish_seen_subcommand_from enable disable" -l system -d "Every program (/etc/ld.so.preload)"
complete -c elidectl -n "__fish_seen_subcommand_from enable disable" -l root -x -a "(__fish_complete_directories)" -d "The system in DIR"
complete -c elidectl -n "__fish_seen_subcommand_from enable disable" -l library -r -F -d "This libelide.so"
complete -c elidectl -n "__fish_seen_subcommand_from enable disable" -l now -d "systemctl daemon-reload and try-restart"
complete -c elidectl -n "__fish_seen_subcommand_from enable" -l mode -x -a "off on adaptive watch" -d "libelide's mode (enable --unit)"
complete -c elidectl -n "__fish_seen_subcommand_from enable" -l force -d "Even where nothing can be elided, or the unit is not installed"
