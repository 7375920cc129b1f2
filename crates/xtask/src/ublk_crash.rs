//! `cargo xtask ublk`'s crash part: `kill -9` of the ublk server, and a
//! new server taking the device over (user recovery, `zns ublk --id N`),
//! cycle after cycle, in the guest.
//!
//! The zoned device is an emulated ZNS SSD on a device image (`emu:file=`,
//! `small`: 4 MiB zones). Each cycle writes a random 64 KiB at the start
//! of a zone of its own with direct I/O and flushes (`dd conv=fsync`: the
//! kernel sends a flush, which makes the emulator's zones durable), kills
//! the server with SIGKILL, checks that `/dev/ublkbN` stayed, starts a new
//! server on the same image with the same device number and checks that
//! it took the device over; then every zone written so far reads back as
//! written and its write pointer is where the flushed write left it.
//!
//! The FTL runs on a device image formatted with `zns ftl format`. Each
//! cycle writes a random 256 KiB and flushes, then starts a writer of
//! 4 MiB in FUA writes (`oflag=dsync`) and kills the server while it
//! runs: the writer must end without an error once the new server has
//! taken over (the requests the dead server held are sent again, the
//! ones queued meanwhile are served), and everything written in every
//! cycle reads back. Last, ext4 stays mounted across a kill: a file
//! written and synced before it, another after the takeover, umount,
//! `e2fsck -f -n`, both files read back.
//!
//! Each cycle's new server gets an output file of its own: the script
//! waits for the first line of that file to name the block device, which
//! an older server's file would name at once.

/// The zoned device's number (`/dev/ublkb7`): fixed, so that each new
/// server asks for the same device.
pub const ZONED_ID: u32 = 7;

/// The FTL's device number.
pub const FTL_ID: u32 = 8;

/// Crash cycles on the zoned device by default. Each leaves one more
/// zone partly written, so closed (active) after the restart: `small`
/// allows 14 active zones.
pub const ZONED_CYCLES: u32 = 12;

/// Crash cycles on the FTL by default.
pub const FTL_CYCLES: u32 = 10;

/// The guest's lines for the zoned device: `cycles` (1 to 13) kill and
/// takeover cycles. `dd` is GNU dd's path (direct I/O). Needs the shell
/// helpers of `ublk.rs` (`start_server`, `stop_server`).
pub fn zoned_lines(dd: &str, cycles: u32) -> String {
    let id = ZONED_ID;
    format!(
        r#"# Crash recovery of the zoned device: kill -9, take over, flushed data intact.
run crash-zoned-image /bin/zns emu create /tmp/crash-zoned.img --profile small
ZIMG=emu:file=/tmp/crash-zoned.img
if start_server crash-zoned /tmp/cz.out.0 /bin/zns --device $ZIMG ublk --id {id} --queues 2 --depth 32; then
    c=1; bad=0; t0=$(now)
    while [ $c -le {cycles} ] && [ $bad -eq 0 ]; do
        head -c 65536 /dev/urandom > /tmp/cz.$c
        {dd} if=/tmp/cz.$c of=$D bs=64k seek=$((c * 64)) count=1 oflag=direct conv=fsync 2>/tmp/cz.dd || {{ bad=1; echo "FAIL crash-zoned-$c: the flushed write failed: $(cat /tmp/cz.dd)"; }}
        kill -KILL $SP; wait $SP 2>/dev/null
        [ -b $D ] || {{ bad=1; echo "FAIL crash-zoned-$c: $D went away with its server"; break; }}
        start_server crash-zoned-takeover-$c /tmp/cz.out.$c /bin/zns --device $ZIMG ublk --id {id} || {{ bad=1; break; }}
        grep -q "took over $D" /tmp/cz.out.$c || {{ bad=1; echo "FAIL crash-zoned-$c: the new server did not take $D over"; }}
        j=1
        while [ $j -le $c ]; do
            {dd} if=$D bs=64k skip=$((j * 64)) count=1 iflag=direct 2>/dev/null | cmp -s - /tmp/cz.$j || {{ bad=1; echo "FAIL crash-zoned-$c: zone $j does not read back as written"; }}
            z=$(blkzone report -o $((j * 8192)) -c 1 $D)
            case "$z" in *"wptr 0x000080 "*) ;; *) bad=1; echo "FAIL crash-zoned-$c: zone $j's write pointer: $z" ;; esac
            j=$((j + 1))
        done
        c=$((c + 1))
    done
    if [ $bad -eq 0 ]; then
        say "END crash-zoned: {cycles} cycles of kill -9 and takeover, every flushed zone intact with its write pointer ($(( $(now) - t0 )) s)"
    else
        fail=1
    fi
    stop_server crash-zoned-stop /tmp/cz.out.$((c - 1))
fi
"#
    )
}

/// The guest's lines for the FTL: `cycles` kill and takeover cycles with
/// a writer in flight, then ext4 mounted across a kill. `dd` is GNU dd's
/// path, `mke2fs` Debian's.
pub fn ftl_lines(dd: &str, mke2fs: &str, cycles: u32) -> String {
    let id = FTL_ID;
    format!(
        r#"# Crash recovery of the FTL: kill -9 with a writer in flight, take over.
run crash-ftl-image /bin/zns emu create /tmp/crash-ftl.img --profile small
FIMG=emu:file=/tmp/crash-ftl.img
run crash-ftl-format /bin/zns --device $FIMG ftl format
# The writers' 4 MiB regions start at 64 MiB, past the flushed ones.
if start_server crash-ftl /tmp/cf.out.0 /bin/zns --device $FIMG ftl ublk --id {id}; then
    c=1; bad=0; t0=$(now)
    while [ $c -le {cycles} ] && [ $bad -eq 0 ]; do
        head -c 262144 /dev/urandom > /tmp/cf.$c
        {dd} if=/tmp/cf.$c of=$D bs=64k seek=$((c * 4)) count=4 oflag=direct conv=fsync 2>/tmp/cf.dd || {{ bad=1; echo "FAIL crash-ftl-$c: the flushed write failed: $(cat /tmp/cf.dd)"; }}
        head -c 4194304 /dev/urandom > /tmp/cf.w$c
        {dd} if=/tmp/cf.w$c of=$D bs=64k seek=$((1024 + c * 64)) oflag=direct,dsync 2>/tmp/cf.w.err &
        W=$!
        sleep 0.3
        kill -0 $W 2>/dev/null && inflight=$((inflight + 1))
        kill -KILL $SP; wait $SP 2>/dev/null
        [ -b $D ] || {{ bad=1; echo "FAIL crash-ftl-$c: $D went away with its server"; break; }}
        start_server crash-ftl-takeover-$c /tmp/cf.out.$c /bin/zns --device $FIMG ftl ublk --id {id} || {{ bad=1; break; }}
        grep -q "took over $D" /tmp/cf.out.$c || {{ bad=1; echo "FAIL crash-ftl-$c: the new server did not take $D over"; }}
        wait $W || {{ bad=1; echo "FAIL crash-ftl-$c: the writer in flight failed: $(cat /tmp/cf.w.err)"; }}
        j=1
        while [ $j -le $c ]; do
            {dd} if=$D bs=64k skip=$((j * 4)) count=4 iflag=direct 2>/dev/null | cmp -s - /tmp/cf.$j || {{ bad=1; echo "FAIL crash-ftl-$c: cycle $j's flushed 256 KiB do not read back"; }}
            {dd} if=$D bs=64k skip=$((1024 + j * 64)) count=64 iflag=direct 2>/dev/null | cmp -s - /tmp/cf.w$j || {{ bad=1; echo "FAIL crash-ftl-$c: cycle $j's FUA writer's 4 MiB do not read back"; }}
            j=$((j + 1))
        done
        c=$((c + 1))
    done
    if [ $bad -eq 0 ]; then
        say "END crash-ftl: {cycles} cycles of kill -9 and takeover (a writer in flight at ${{inflight:-0}} of the kills, none failed), every flushed or FUA write intact ($(( $(now) - t0 )) s)"
    else
        fail=1
    fi
    # ext4 mounted across a kill.
    run crash-ext4-mkfs {mke2fs} -t ext4 -F -q $D
    run crash-ext4-mount mount -t ext4 $D /mnt
    head -c 1048576 /dev/urandom > /tmp/cf.before
    head -c 1048576 /dev/urandom > /tmp/cf.after
    run crash-ext4-before sh -c 'cp /tmp/cf.before /mnt/before && sync'
    kill -KILL $SP; wait $SP 2>/dev/null
    if start_server crash-ext4-takeover /tmp/cf.out.ext4 /bin/zns --device $FIMG ftl ublk --id {id}; then
        run crash-ext4-after sh -c 'cp /tmp/cf.after /mnt/after && sync'
        run crash-ext4-umount umount /mnt
        run crash-ext4-fsck e2fsck -f -n $D
        run crash-ext4-mount-ro mount -t ext4 -o ro $D /mnt
        run crash-ext4-read sh -c 'cmp /tmp/cf.before /mnt/before && cmp /tmp/cf.after /mnt/after'
        run crash-ext4-umount-ro umount /mnt
        stop_server crash-ftl-stop /tmp/cf.out.ext4
        expect crash-ftl-checkpoint "checkpoint written" cat /tmp/cf.out.ext4
    else
        umount -l /mnt 2>/dev/null
    fi
fi
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cycle_flushes_kills_takes_over_then_checks() {
        let s = zoned_lines("/usr/bin/dd", 3);
        let write = s.find("oflag=direct conv=fsync").unwrap();
        let kill = s.find("kill -KILL $SP").unwrap();
        let takeover = s.find("ublk --id 7 ||").unwrap();
        let check = s.find("cmp -s - /tmp/cz.$j").unwrap();
        assert!(write < kill && kill < takeover && takeover < check);
        assert!(s.contains("while [ $c -le 3 ]") && s.contains("\"wptr 0x000080 \""));
        assert!(s.contains("start_server crash-zoned-takeover-$c /tmp/cz.out.$c"));
        let f = ftl_lines("/usr/bin/dd", "/usr/sbin/mke2fs", 2);
        let writer = f.find("oflag=direct,dsync 2>/tmp/cf.w.err &").unwrap();
        let kill = f.find("kill -KILL $SP").unwrap();
        let wait = f.find("wait $W ||").unwrap();
        assert!(writer < kill && kill < wait);
        assert!(f.contains("ftl ublk --id 8") && f.contains("e2fsck -f -n $D"));
        assert!(f.find("crash-ext4-before").unwrap() < f.find("crash-ext4-takeover").unwrap());
    }
}
