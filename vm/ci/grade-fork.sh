#!/bin/sh
# Grade a student's fork as CI does: make the exercise branch, put the
# student's submission on it, and run `make grade`. The forge's workflow
# (.github/workflows/grade.yml, .gitlab-ci.yml) runs exactly this, inside
# Debian 12; run it the same way on your machine with vm/ci/run-local.sh.
#
# The fork carries its submission as submissions/NN-slug.bundle or
# submissions/NN-slug.patch (made with `make submission STAGE=NN OUT=...`).
# STAGE names the stage; without it, every submission in the fork is graded.
# Writes grade-NN-slug.txt per stage; the exit status is make grade's.
set -eu
cd "$(dirname "$0")/../.."
tree=${KERNEL_TREE:-build/linux}
status=0
found=0
for file in submissions/*.bundle submissions/*.patch; do
	[ -f "$file" ] || continue
	slug=$(basename "$file" | sed 's/\.[a-z]*$//')
	case "$slug" in "${STAGE:-}"*) ;; *) continue ;; esac
	found=1
	make -s exercise STAGE="$slug"
	git -C "$tree" checkout -q "exercise/$slug"
	case "$file" in
	*.bundle) git -C "$tree" fetch -q "$PWD/$file" "refs/lab/submission/$slug"
		git -C "$tree" merge -q --ff-only FETCH_HEAD ;;
	*.patch) git -C "$tree" -c user.name=student -c user.email=student@invalid \
		am -q "$PWD/$file" ;;
	esac
	make grade STAGE="$slug" 2>&1 | tee "grade-$slug.txt" || true
	grep -q '  FAIL  ' "grade-$slug.txt" && status=1
	grep -q '  PASS  ' "grade-$slug.txt" || status=1
done
[ "$found" = 1 ] || { echo "grade-fork: no submissions/${STAGE:-}*.bundle or .patch in this fork" >&2; exit 2; }
exit "$status"
