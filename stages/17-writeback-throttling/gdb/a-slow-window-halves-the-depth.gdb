# One slow window, one step at a time: slow-reads sets wbt's latency
# target on the disk to 1 us and reads past a buffered writer, so the
# first window with a read in it exceeds the target. The walkthrough
# stops in rq_depth_scale_down() when wbt's timer calls it, reads the
# window's statistics from the caller's struct rq_wb, and finishes the
# call to see the step and the depth it left. It does it twice.
#
# run: slow-reads /dev/vda
# expect: layout: struct rq_wb's rq_depth at \+\d+
# expect: window 1 on CPU \d: target 1000 ns; (\d+ reads, the fastest in \d+ ns|no read completed, one waiting); \d+ writes; called from scale_down\(\) in wb_timer_fn\(\), hard_throttle=1
# expect: window 1: step 0 and depth 16 of a queue of \d+ became step 1 and depth 8, wb_normal 4, wb_background 2
# expect: window 2 on CPU \d: target 1000 ns
# expect: window 2: step 1 and depth 8 of a queue of \d+ became step 2 and depth 4, wb_normal 2, wb_background 1
# expect: verdict: each slow window moved the step up by one and halved the depth

python
import os

OUT = os.environ.get("LAB_OUT")
seen = []


def say(text):
    """Print, and keep in $LAB_OUT/walkthrough.txt for the chapter."""
    gdb.write(text + "\n")
    if OUT:
        with open(os.path.join(OUT, "walkthrough.txt"), "a") as f:
            f.write(text + "\n")


def value(expression):
    return int(gdb.parse_and_eval(expression))


OFFSET = "(unsigned long) &((struct rq_wb *) 0)->rq_depth"
RWB = f"((struct rq_wb *) ((unsigned long) rqd - {OFFSET}))"


def layout():
    say(f"layout: struct rq_wb's rq_depth at +{value(OFFSET)}")


def at_scale_down():
    n = len(seen) + 1
    # scale_down() is inlined into wb_timer_fn(): gdb shows both.
    frame, callers = gdb.selected_frame().older(), []
    while frame and len(callers) < 2:
        callers.append(f"{frame.name()}()")
        frame = frame.older()
    before = (value("rqd->scale_step"), value("rqd->max_depth"), value("rqd->queue_depth"))
    reads = value(RWB + "->cb->stat[0].nr_samples")
    # A window with no read completed is slow when a read has waited
    # longer than the target (rwb_sync_issue_lat()).
    fastest = (f"{reads} reads, the fastest in {value(RWB + '->cb->stat[0].min')} ns" if reads
               else "no read completed, one waiting")
    say(f"window {n} on CPU {gdb.selected_thread().num - 1}: target "
        f"{value(RWB + '->min_lat_nsec')} ns; {fastest}; "
        f"{value(RWB + '->cb->stat[1].nr_samples')} writes; called from "
        f"{' in '.join(callers)}, "
        f"hard_throttle={value('hard_throttle')}")
    rwb = value(f"(unsigned long) {RWB}")
    gdb.execute("finish", to_string=True)
    # Back in the caller: calc_wb_limits() has not run yet, so the limits
    # are worked out as it will.
    rqd = f"((struct rq_wb *) {rwb})->rq_depth"
    step, depth = value(f"{rqd}.scale_step"), value(f"{rqd}.max_depth")
    normal, background = (depth, 1) if depth <= 2 else ((depth + 1) // 2, (depth + 3) // 4)
    say(f"window {n}: step {before[0]} and depth {before[1]} of a queue of {before[2]} became "
        f"step {step} and depth {depth}, wb_normal {normal}, wb_background {background}")
    seen.append((before[0], before[1], step, depth))


def verdict():
    if len(seen) == 2 and all(s == b + 1 and d == (bd - 1) // 2 + 1 for b, bd, s, d in seen):
        say("verdict: each slow window moved the step up by one and halved the depth")
end

python layout()
# Nothing but wbt's timer calls it in this kernel.
break rq_depth_scale_down
continue
python at_scale_down()
continue
python at_scale_down()
python verdict()
delete

# Let the reads finish; the guest powers off.
continue
