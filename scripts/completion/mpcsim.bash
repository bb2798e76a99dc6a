# bash completion for mpcsim — installed by `make install` to
# $(PREFIX)/share/bash-completion/completions/mpcsim; or: source scripts/completion/mpcsim.bash
#
# Subcommands from `mpcsim --help`, each subcommand's options from its own `--help` (printed
# from the option table the command parses with, so they never go stale; `mpcsim trace SUB
# --help` for trace's), and the names a value may take from `mpcsim list`.

_mpcsim_list() { # the first column of `mpcsim list WHAT`, without its header
    "${1}" list "${2}" 2>/dev/null | awk 'NR > 1 && $1 ~ /^[A-Za-z0-9]/ { print $1 }'
}

_mpcsim() {
    local cur prev bin cmd
    COMPREPLY=()
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    bin="${COMP_WORDS[0]}"
    if [ "${COMP_CWORD}" -eq 1 ]; then
        local cmds
        cmds=$("${bin}" --help 2>/dev/null | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } /^$/ { on = 0 }')
        COMPREPLY=($(compgen -W "${cmds} --help --version" -- "${cur}"))
        return 0
    fi
    cmd="${COMP_WORDS[1]}"
    case "${prev}" in
        -m|--model) COMPREPLY=($(compgen -W "$(_mpcsim_list "${bin}" models)" -- "${cur}"))
                    compopt -o default 2>/dev/null; return 0 ;;
        -p|--protocol) COMPREPLY=($(compgen -W "$(_mpcsim_list "${bin}" protocols)" -- "${cur}")); return 0 ;;
        -n|--network) COMPREPLY=($(compgen -W "$(_mpcsim_list "${bin}" networks)" -- "${cur}")); return 0 ;;
        --policy) COMPREPLY=($(compgen -W "$(_mpcsim_list "${bin}" policies)" -- "${cur}")); return 0 ;;
        --format) COMPREPLY=($(compgen -W "png svg pdf" -- "${cur}")); return 0 ;;
        --latency) [ "${cmd}" = plot ] && { COMPREPLY=($(compgen -W "total decode-per-token" -- "${cur}")); return 0; } ;;
        --x) COMPREPLY=($(compgen -W "prompt_len decode_len batch latency_ms bandwidth_mbps" -- "${cur}")); return 0 ;;
        --by) COMPREPLY=($(compgen -W "model network protocol policy model,network none" -- "${cur}")); return 0 ;;
        --phase) COMPREPLY=($(compgen -W "prefill decode" -- "${cur}")); return 0 ;;
        --wire) COMPREPLY=($(compgen -W "tcp none" -- "${cur}")); return 0 ;;
        --scheduler) COMPREPLY=($(compgen -W "fcfs lpm" -- "${cur}")); return 0 ;;
        --format) COMPREPLY=($(compgen -W "text csv json markdown latex" -- "${cur}")); return 0 ;;
        --order) COMPREPLY=($(compgen -W "family scenario" -- "${cur}")); return 0 ;;
        --position) COMPREPLY=($(compgen -W "rerotate recompute" -- "${cur}")); return 0 ;;
        -o|--output|--data|--db|--text|--timeline|--dump-program|--workload|--plot)
            COMPREPLY=($(compgen -f -- "${cur}")); compopt -o filenames 2>/dev/null; return 0 ;;
    esac
    if [ "${cmd}" = list ] && [ "${COMP_CWORD}" -eq 2 ] && [[ "${cur}" != -* ]]; then
        COMPREPLY=($(compgen -W "models protocols policies networks machines keys" -- "${cur}"))
        return 0
    fi
    if [ "${cmd}" = trace ] && [ "${COMP_CWORD}" -eq 2 ] && [[ "${cur}" != -* ]]; then
        COMPREPLY=($(compgen -W "record synth fit info" -- "${cur}"))
        return 0
    fi
    if [ "${cmd}" = policy ] && [ "${COMP_CWORD}" -eq 2 ] && [[ "${cur}" != -* ]]; then
        COMPREPLY=($(compgen -W "check" -- "${cur}"))
        return 0
    fi
    if [[ "${cur}" == -* ]]; then
        local opts
        local sub=""
        [ "${cmd}" = trace ] && [ "${COMP_CWORD}" -gt 2 ] && sub="${COMP_WORDS[2]}"
        [ "${cmd}" = policy ] && [ "${COMP_CWORD}" -gt 2 ] && sub="${COMP_WORDS[2]}"
        opts=$("${bin}" "${cmd}" ${sub} --help 2>/dev/null | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
        COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
        return 0
    fi
    case "${cmd}" in
        run|serve) COMPREPLY=($(compgen -f -X '!*.yaml' -- "${cur}") $(compgen -f -X '!*.yml' -- "${cur}") $(compgen -d -- "${cur}")) ;;
        report|plot|merge) COMPREPLY=($(compgen -f -X '!*.db' -- "${cur}") $(compgen -d -- "${cur}")) ;;
        *) COMPREPLY=($(compgen -f -- "${cur}")) ;;
    esac
    compopt -o filenames 2>/dev/null
    return 0
}
complete -F _mpcsim mpcsim
