#!/usr/bin/env bash
# Installs what `make build` built, or removes it again (make install / make uninstall):
#
#   scripts/install.sh install|uninstall   with PREFIX (default /usr/local), SYSCONFDIR (default /etc), DESTDIR
#                                         (default empty: staging root for packagers) and LAB (yes, the default,
#                                         or no: without the lab, as a production node wants) in the environment
#
# Layout (under DESTDIR):
#   PREFIX/bin/lockstep, lockstepd                   the CLI and the node agent
#   PREFIX/libexec/lockstep/                         the lab's programs (kernels, corebench, lockbench, mpirun
#                                                    wrapper), where an installed `lockstep experiment` finds them
#   PREFIX/libexec/lockstep/slurm/                   Slurm's Prolog, Epilog, PrologSlurmctld and EpilogSlurmctld
#                                                    hooks, and hook-dir (several programs for one of slurmctld's
#                                                    hooks); deploy/slurm/README.md links them into place
#   PREFIX/lib/lockstep/                             the PMPI profiler and the lock interposers (LD_PRELOAD), the
#                                                    SPANK plugin that preloads the profiler into Slurm jobs
#   PREFIX/lib/systemd/system/lockstep-agent.service the unit, pointing at PREFIX/bin/lockstepd
#   PREFIX/share/man/man1/lockstep*.1, man8/lockstepd.8
#   PREFIX/share/bash-completion/completions/lockstep, zsh/site-functions/_lockstep,
#   PREFIX/share/fish/vendor_completions.d/lockstep.fish
#   PREFIX/share/doc/lockstep/                       README.md and docs/; examples/prometheus/ (scrape
#                                                    configuration and alert rules), examples/grafana/
#   PREFIX/share/lockstep/lab/                       the lab's data: the test cluster's scripts (cluster/) and the
#                                                    scale model (model/scale_model.py)
#   SYSCONFDIR/lockstep/agent.toml                   only if absent (an existing configuration is kept)
# Every file installed is listed in PREFIX/share/lockstep/installed-files; uninstall removes exactly those (the
# configuration only while it is unchanged) and then the directories they leave empty.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=${PREFIX:-/usr/local}
sysconfdir=${SYSCONFDIR:-/etc}
destdir=${DESTDIR:-}
lab=${LAB:-yes}
[[ $lab == yes || $lab == no ]] || { echo "install.sh: LAB=$lab (expected yes or no)" >&2; exit 2; }
for dir in "$prefix" "$sysconfdir"; do
  [[ $dir == /* ]] || { echo "install.sh: $dir is not an absolute path (PREFIX and SYSCONFDIR must be)" >&2; exit 2; }
done
manifest=$prefix/share/lockstep/installed-files

# Installs file $2 as $3 (a path under PREFIX or SYSCONFDIR) with mode $1, and lists it in the manifest.
put() {
  install -D -m "$1" "$2" "$destdir$3"
  echo "$3" >> "$destdir$manifest.new"
}

# Installs what `sed` makes of file $2 (the expression $3) as $4 with mode $1.
put_edited() {
  local tmp
  tmp=$(mktemp)
  sed -e "$3" "$2" > "$tmp"
  put "$1" "$tmp" "$4"
  rm -f "$tmp"
}

install_all() {
  [[ -x build/bin/lockstep && -d build/share/man/man1 ]] || { echo "install.sh: run make build first" >&2; exit 2; }
  mkdir -p "$destdir$prefix/share/lockstep"
  : > "$destdir$manifest.new"
  local f name
  put 755 build/bin/lockstep "$prefix/bin/lockstep"
  put 755 build/bin/lockstepd "$prefix/bin/lockstepd"
  for f in build/bin/*; do
    name=$(basename "$f")
    [[ $name == lockstep || $name == lockstepd || $lab == no ]] || put 755 "$f" "$prefix/libexec/lockstep/$name"
  done
  for f in build/lib/*.so; do
    put 644 "$f" "$prefix/lib/lockstep/$(basename "$f")"
  done
  local to_bin="s#/usr/local/bin/#$prefix/bin/#g"
  for f in prolog epilog prolog-slurmctld epilog-slurmctld hook-dir; do
    put_edited 755 "deploy/slurm/$f" "$to_bin; s#/etc/slurm/lockstep/#$prefix/libexec/lockstep/slurm/#g" \
      "$prefix/libexec/lockstep/slurm/$f"
  done
  put_edited 644 deploy/systemd/lockstep-agent.service \
    "$to_bin; s#/usr/local/share/doc/#$prefix/share/doc/#g; s#/etc/lockstep/#$sysconfdir/lockstep/#g" \
    "$prefix/lib/systemd/system/lockstep-agent.service"
  put 644 deploy/systemd/agent.toml "$prefix/share/lockstep/agent.toml"
  for f in prometheus.yml lockstep-rules.yml; do
    put 644 "deploy/prometheus/$f" "$prefix/share/doc/lockstep/examples/prometheus/$f"
  done
  put 644 deploy/grafana/lockstep.json "$prefix/share/doc/lockstep/examples/grafana/lockstep.json"
  if [[ $lab == yes ]]; then
    for f in up down trusted.sh; do
      put 755 "tests/cluster/$f" "$prefix/share/lockstep/lab/cluster/$f"
    done
    put 755 deploy/slurm/hook-dir "$prefix/share/lockstep/lab/cluster/hook-dir"
    put 644 scripts/running.sh "$prefix/share/lockstep/lab/cluster/running.sh"
    put 644 experiments/model/scale_model.py "$prefix/share/lockstep/lab/model/scale_model.py"
  fi
  if [[ ! -e $destdir$sysconfdir/lockstep/agent.toml ]]; then
    put 644 deploy/systemd/agent.toml "$sysconfdir/lockstep/agent.toml"
  fi
  for f in build/share/man/man1/*.1; do
    put 644 "$f" "$prefix/share/man/man1/$(basename "$f")"
  done
  put 644 build/share/man/man8/lockstepd.8 "$prefix/share/man/man8/lockstepd.8"
  put 644 build/share/completions/lockstep.bash "$prefix/share/bash-completion/completions/lockstep"
  put 644 build/share/completions/_lockstep "$prefix/share/zsh/site-functions/_lockstep"
  put 644 build/share/completions/lockstep.fish "$prefix/share/fish/vendor_completions.d/lockstep.fish"
  put 644 README.md "$prefix/share/doc/lockstep/README.md"
  while IFS= read -r f; do
    put 644 "$f" "$prefix/share/doc/lockstep/$f"
  done < <(find docs -type f | sort)
  echo "$manifest" >> "$destdir$manifest.new"
  mv "$destdir$manifest.new" "$destdir$manifest"
  echo "install.sh: installed $(wc -l < "$destdir$manifest") files under ${destdir:-/} (list: $destdir$manifest)"
}

uninstall_all() {
  [[ -f $destdir$manifest ]] || { echo "install.sh: nothing installed under ${destdir}$prefix ($manifest missing)" >&2; exit 2; }
  local f removed=0 dirs=()
  while IFS= read -r f; do
    [[ $f == "$prefix"/* || $f == "$sysconfdir"/lockstep/* ]] || { echo "install.sh: $manifest lists $f, outside PREFIX: left alone" >&2; continue; }
    if [[ $f == "$sysconfdir/lockstep/agent.toml" ]] && ! cmp -s "$destdir$f" deploy/systemd/agent.toml; then
      echo "install.sh: $destdir$f was changed: kept"
      continue
    fi
    if [[ -f $destdir$f || -L $destdir$f ]]; then
      rm -f "$destdir$f"
      removed=$((removed + 1))
    fi
    dirs+=("$(dirname "$destdir$f")")
  done < "$destdir$manifest"
  # The directories left empty, deepest first, up to (not including) PREFIX and SYSCONFDIR themselves.
  local d
  printf '%s\n' "${dirs[@]}" | sort -u | awk '{ print length, $0 }' | sort -rn | cut -d' ' -f2- |
    while IFS= read -r d; do
      while [[ $d != "$destdir$prefix" && $d != "$destdir$sysconfdir" && $d == "$destdir"/* ]] && rmdir "$d" 2> /dev/null; do
        d=$(dirname "$d")
      done
    done
  echo "install.sh: removed $removed files from ${destdir:-/}"
}

case ${1:-} in
  install) install_all ;;
  uninstall) uninstall_all ;;
  *) echo "install.sh: expected install or uninstall, got '${1:-}'" >&2; exit 2 ;;
esac
