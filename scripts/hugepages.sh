#!/usr/bin/env bash
# Reserve 2 MiB huge pages and mount hugetlbfs for huge-page regions (docs/regions.md, the benchmarks'
# benchmarks). Root only; changes the machine's settings until --release or reboot.
#
#   scripts/hugepages.sh 10            # reserve 10 GiB of huge pages, mount /dev/hugepages
#   scripts/bench.sh --gib 4 --dir /dev/hugepages
#   scripts/hugepages.sh --release     # unmount (if we mounted) and give the pages back
#
# A region file created on hugetlbfs is mapped with 2 MiB pages (`Region::huge_pages()` says so);
# regions elsewhere ask for transparent huge pages with MADV_HUGEPAGE.
set -euo pipefail
MNT=${DTA_HUGETLBFS:-/dev/hugepages}
if [ "$(id -u)" != 0 ]; then
    echo "hugepages.sh: needs root (writes /proc/sys/vm/nr_hugepages, mounts hugetlbfs)" >&2
    exit 2
fi
if [ "${1:-}" = "--release" ]; then
    if mountpoint -q "$MNT"; then
        rm -f "$MNT"/*.region 2>/dev/null || true
        umount "$MNT"
    fi
    echo 0 >/proc/sys/vm/nr_hugepages
    echo "hugepages.sh: released; HugePages_Total: $(awk '/HugePages_Total/ {print $2}' /proc/meminfo)"
    exit 0
fi
GIB=${1:?usage: hugepages.sh GIB | --release}
want=$((GIB * 512))
echo "$want" >/proc/sys/vm/nr_hugepages
got=$(awk '/HugePages_Total/ {print $2}' /proc/meminfo)
if [ "$got" -lt "$want" ]; then
    echo "hugepages.sh: asked for $want pages of 2 MiB, the kernel gave $got (memory too fragmented or too small)" >&2
    exit 1
fi
mkdir -p "$MNT"
mountpoint -q "$MNT" || mount -t hugetlbfs -o pagesize=2M none "$MNT"
echo "hugepages.sh: $got huge pages of 2 MiB ($((got / 512)) GiB) reserved, hugetlbfs at $MNT"
