#!/usr/bin/env bash
# The documentation cannot go stale (ctest docs_commands):
#   1. every generated region of README.md and docs/*.md matches docs/results/ (scripts/docs_tables.py --check);
#   2. each saved sample report in docs/results/sample/ equals what this build prints for its command;
#   3. every command in a ```sh docs-test block of README.md and docs/*.md runs and exits 0;
#   4. every relative link of README.md, CHANGELOG.md and docs/*.md names a file that exists.
# A failure names the page and line, the command and its output. Prediction only: no GPU needed.
# Usage: tests/docs/docs_commands.sh PERFSIM_BIN SOURCE_DIR
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$2
cd "$src" || exit 1
command -v python3 >/dev/null || { echo "docs_commands: python3 not found: skipped"; exit 77; }
failures=0
fail() { failures=$((failures + 1)); printf 'FAIL %s\n' "$1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/    /'; }

# 1. Generated tables.
if ! out=$(python3 scripts/docs_tables.py --check 2>&1); then fail "generated regions are stale" "$out"; fi

# 2. Sample reports: docs/results/sample/NAME.txt holds the output of the command the manifest names.
while IFS=$'\t' read -r file cmd; do
  [ -n "$file" ] || continue
  want="docs/results/$file"
  got=$(eval "\"$bin\" ${cmd#perfsim }" 2>&1) || { fail "$want: '$cmd' exited non-zero" "$got"; continue; }
  if ! diff_out=$(diff <(printf '%s\n' "$got") "$want"); then
    fail "$want differs from what '$cmd' prints now (rewrite it with: $cmd > $want; python3 scripts/docs_tables.py)" "$diff_out"
  fi
done < <(python3 - <<'PY'
import json
for f, m in json.load(open("docs/results/manifest.json")).items():
    if f.startswith("sample/") and m.get("command"):
        print(f + "\t" + m["command"])
PY
)

# 3. Commands of ```sh docs-test blocks: one command a line ('\' continues it); '#' starts a comment.
ran=0
while IFS=$'\t' read -r where cmd; do
  case "$cmd" in perfsim\ *) run="\"$bin\" ${cmd#perfsim }" ;; *) run=$cmd ;; esac
  ran=$((ran + 1))
  if ! out=$(timeout 60 bash -c "$run" 2>&1 </dev/null); then
    fail "$where: $cmd" "$(printf '%s\n' "$out" | tail -n 30)"
  fi
done < <(python3 - README.md docs/*.md <<'PY'
import re, sys
for page in sys.argv[1:]:
    inside, pending, start = False, "", 0
    for n, line in enumerate(open(page, encoding="utf-8"), 1):
        s = line.rstrip("\n")
        if not inside:
            inside = bool(re.match(r"^```sh docs-test\s*$", s))
            continue
        if s.startswith("```"):
            inside = False
            continue
        s = re.sub(r"\s+#.*$", "", s).strip() if not s.lstrip().startswith("#") else ""
        if not s and not pending:
            continue
        if not pending:
            start = n
        if s.endswith("\\"):
            pending += s[:-1] + " "
            continue
        print(f"{page}:{start}\t{pending + s}")
        pending = ""
PY
)
[ "$ran" -gt 0 ] || fail "no \`\`\`sh docs-test block found in README.md or docs/*.md"

# 4. Relative links.
if ! out=$(python3 - README.md CHANGELOG.md docs/*.md <<'PY'
import os, re, sys
def anchors(path):  # GitHub's heading ids
    text = re.sub(r"```.*?```", "", open(path, encoding="utf-8").read(), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", text, flags=re.M)}
bad = []
for page in sys.argv[1:]:
    text = open(page, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target, _, anchor = m.group(1).partition("#")
        if re.match(r"^[a-z]+:", target):
            continue
        path = os.path.join(os.path.dirname(page), target) if target else page
        if not os.path.exists(path):
            bad.append(f"{page}: link to a missing file: {m.group(1)}")
        elif anchor and path.endswith(".md") and anchor not in anchors(path):
            bad.append(f"{page}: link to a missing heading: {m.group(1)}")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
); then fail "broken links" "$out"; fi

# The README's set-up block keeps its two commands.
grep -q '^make run ' README.md && grep -q '^make test ' README.md || fail "README.md: the 'Two commands' block lost make run or make test"

if [ "$failures" -gt 0 ]; then
  echo "docs_commands: $failures failure(s); $ran docs-test commands"
  exit 1
fi
echo "docs_commands: ok ($ran docs-test commands, generated regions current, sample reports current, links resolve)"
