# bash completion for shoalctl (installed to
# /usr/share/bash-completion/completions/shoalctl; from a checkout:
# source packaging/shoalctl.bash).
_shoalctl() {
  local cur prev words cword
  _init_completion 2>/dev/null || {
    cur="${COMP_WORDS[COMP_CWORD]}"; prev="${COMP_WORDS[COMP_CWORD-1]}"
    words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
  }
  case "$prev" in
    -o|--output) COMPREPLY=($(compgen -W "json yaml name wide" -- "$cur")); return ;;
    --data|-f|--inventory|--cluster) COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  local top="identity invite peers submit get describe logs delete nominate backup status place schedule"
  local command="" sub="" i
  for ((i = 1; i < cword; i++)); do
    case "${words[i]}" in
      --data|-o|--output|-n|--namespace|-f) ((i++)) ;;
      -*) ;;
      *) if [ -z "$command" ]; then command="${words[i]}"; elif [ -z "$sub" ]; then sub="${words[i]}"; fi ;;
    esac
  done
  if [ -z "$command" ]; then
    COMPREPLY=($(compgen -W "$top --data --help" -- "$cur")); return
  fi
  case "$command" in
    invite) [ -z "$sub" ] && COMPREPLY=($(compgen -W "create accept list revoke" -- "$cur")) ;;
    get) [ -z "$sub" ] && COMPREPLY=($(compgen -W "workloads reservations clusters" -- "$cur")) \
           || COMPREPLY=($(compgen -W "-n --namespace -A --all-namespaces -o --output -w --watch --limit --continue" -- "$cur")) ;;
    describe) [ -z "$sub" ] && COMPREPLY=($(compgen -W "workload peer" -- "$cur")) ;;
    delete) [ -z "$sub" ] && COMPREPLY=($(compgen -W "workload" -- "$cur")) ;;
    logs) COMPREPLY=($(compgen -W "--copy --replica -f --follow --tail" -- "$cur")) ;;
    submit) COMPREPLY=($(compgen -W "-f" -- "$cur")) ;;
    place) COMPREPLY=($(compgen -W "-f --inventory --live --explain -o" -- "$cur")) ;;
    peers|status) COMPREPLY=($(compgen -W "-o --output" -- "$cur")) ;;
  esac
}
complete -F _shoalctl shoalctl
