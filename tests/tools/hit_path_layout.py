#!/usr/bin/env python3
"""Checks that libdevdl.so has its hit path side by side: every function libdevdl/hit_path.order
names is in the library (else the list is stale), and together they span little more than their
own size (else the linker did not lay them out).

usage: hit_path_layout.py LIBRARY ORDER   (LIBRARY with its symbols, as the portable build links it)
"""
import subprocess
import sys

library, order = sys.argv[1], sys.argv[2]
names = [line.strip() for line in open(order) if line.strip() and not line.startswith('#')]
symbols = {}
for line in subprocess.run(['nm', '-S', '--defined-only', library], capture_output=True, text=True,
                           check=True).stdout.splitlines():
    fields = line.split()
    if len(fields) == 4:
        symbols[fields[3]] = (int(fields[0], 16), int(fields[1], 16))
if not symbols:
    sys.exit(f'{library} has no symbol table: the check needs the library unstripped')

missing = [name for name in names if name not in symbols]
if missing:
    sys.exit(f'{order} names {len(missing)} of its {len(names)} functions that {library} does not '
             f'have (the first: {missing[0]}): run scripts/hit-path.sh order')
start = min(symbols[name][0] for name in names)
end = max(symbols[name][0] + symbols[name][1] for name in names)
size = sum(symbols[name][1] for name in names)
# Between two functions lies at most the padding to the next one's alignment (up to 64 bytes).
if end - start > size + 64 * len(names):
    sys.exit(f'the {len(names)} functions of the hit path span {(end - start) // 1024} KB of '
             f'{library} for {size // 1024} KB of code: the linker did not lay them out together')
print(f'{len(names)} functions of the hit path, {size // 1024} KB, side by side at {start:#x}')
