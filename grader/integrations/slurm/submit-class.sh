#!/usr/bin/env bash
# Grades a class on Slurm: an array job of N tasks, task K grading share K/N of the class
# (grade-array.sbatch, beside this file), then the merge of the N shares (merge.sbatch), a job that
# starts once every task has succeeded and is cancelled if one fails. docs/scaling.md explains it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
    cat <<'USAGE'
usage: submit-class.sh --class PATH --exercise EXERCISE --seed N --shares N --out DIR
                       [--grade PATH] [--jobs N] [--parsable] [-- SBATCH-OPTION...]

  --class PATH     the class: an nbgrader course folder, its submitted/ folder, or any folder of
                   submissions, on a file system every node reads
  --exercise ID    the exercise graded (exercise3, ...)
  --seed N         the seed every share grades with (shares with other seeds do not merge)
  --shares N       the number of shares: the array's tasks 1 to N
  --out DIR        results: DIR/shard-K for each share, DIR/class for the merged class,
                   DIR/logs for Slurm's output files (created if missing)
  --grade PATH     the grade command of the grader's virtual environment (default: $GRADE, else
                   the grade on PATH), given to the jobs by its full path
  --jobs N         submissions a task grades at once (default: twice its CPUs)
  --parsable       print only the two job ids, "ARRAY_ID MERGE_ID"
  -- ...           options for both sbatch calls, which override the scripts' own
                   (e.g. --partition=short --time=02:00:00 --cpus-per-task=4 --mem=8G)
USAGE
}

fail() {
    echo "submit-class.sh: $1" >&2
    exit 2
}

grade=${GRADE:-} class="" exercise="" seed="" shares="" out="" jobs="" parsable=0
while [ "$#" -gt 0 ]; do
    option=$1
    case $option in
        -h | --help) usage; exit 0 ;;
        --parsable) parsable=1; shift; continue ;;
        --) shift; break ;;
        --*=*) value=${option#*=}; option=${option%%=*}; shift ;;
        --*) [ "$#" -ge 2 ] || fail "$option needs a value"; value=$2; shift 2 ;;
        *) fail "unexpected argument '$option' (see --help)" ;;
    esac
    case $option in
        --grade) grade=$value ;;
        --class) class=$value ;;
        --exercise) exercise=$value ;;
        --seed) seed=$value ;;
        --shares) shares=$value ;;
        --out) out=$value ;;
        --jobs) jobs=$value ;;
        *) fail "unknown option $option (see --help)" ;;
    esac
done
sbatch_options=("$@")

[ -n "$class" ] || fail "give the class: --class PATH"
[ -n "$exercise" ] || fail "give the exercise: --exercise EXERCISE"
[ -n "$seed" ] || fail "give the seed every share grades with: --seed N"
[ -n "$shares" ] || fail "give the number of shares: --shares N"
[ -n "$out" ] || fail "give the results folder: --out DIR"
[[ $exercise =~ ^[A-Za-z0-9_]+$ ]] || fail "--exercise takes an exercise's id (exercise3, ...), not '$exercise'"
[[ $seed =~ ^[0-9]+$ ]] || fail "--seed takes a whole number, not '$seed'"
[[ $shares =~ ^[1-9][0-9]*$ ]] || fail "--shares takes a whole number of at least 1, not '$shares'"
[ -z "$jobs" ] || [[ $jobs =~ ^[1-9][0-9]*$ ]] || fail "--jobs takes a whole number of at least 1, not '$jobs'"
[ -e "$class" ] || fail "the class '$class' does not exist"
if [ -z "$grade" ]; then
    grade=$(command -v grade) || fail "no grade on PATH: give --grade PATH (the grade of the grader's virtual environment)"
fi
[ -f "$grade" ] && [ -x "$grade" ] || fail "--grade must be the grade command of the grader's environment, not '$grade'"
command -v sbatch >/dev/null || fail "no sbatch here: submit from a machine of the Slurm cluster"

# The jobs start in other folders, on other nodes: every path they get is absolute.
[[ $class == /* ]] || class=$PWD/$class
[[ $out == /* ]] || out=$PWD/$out
[[ $grade == /* ]] || grade=$PWD/$grade
mkdir -p -- "$out/logs"

array=$(sbatch --parsable --array="1-$shares" --job-name="grade-$exercise" --chdir="$out" \
    --output="logs/grade-%A_%a.out" "${sbatch_options[@]}" \
    "$here/grade-array.sbatch" "$grade" "$class" "$exercise" "$seed" "$shares" "$out" ${jobs:+"$jobs"})
array=${array%%;*}
merge=$(sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes --job-name="merge-$exercise" \
    --chdir="$out" --output="logs/merge-%j.out" "${sbatch_options[@]}" \
    "$here/merge.sbatch" "$grade" "$out" "$shares")
merge=${merge%%;*}

if [ "$parsable" = 1 ]; then
    echo "$array $merge"
else
    echo "Submitted array job $array: $shares task(s), task K grading share K/$shares into $out/shard-K."
    echo "Submitted job $merge: merges the shares into $out/class once every task has succeeded."
    echo "Slurm's output files: $out/logs/. Follow with: squeue -j $array,$merge"
fi
