# The first stop in the LRU list: test_lru_map inserts into an LRU hash map,
# and every insert takes a node with bpf_lru_pop_free(). The kernel's gdb
# helpers (lx-*) are loaded, so the guest's log is readable from gdb too.
# run: test_lru_map
# expect: Breakpoint 1, bpf_lru_pop_free \(lru=(lru@entry=)?0x[0-9a-f]+
# expect: #1 .*prealloc_lru_pop
# expect: \$1 = (true|false)
# expect: Run /init as init process
break bpf_lru_pop_free
continue
backtrace 3
print lru->percpu
lx-dmesg
