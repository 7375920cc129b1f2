//! The `[timing]` table of a device profile: every parameter of the timing
//! model, with its unit in its name (`_ns`, `_us`, `_mbps` = 10^6 bytes per
//! second, `_kib`).

use serde::{Deserialize, Serialize};

/// Most planes a die of a timing profile may have (trace events name the
/// planes an operation covers in a 32-bit mask).
pub const MAX_PLANES: u32 = 32;

/// Parameters of the timing model ([`crate::timing`]). Users copy a
/// profile and edit these; [`TimingProfile::validate`] checks them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimingProfile {
    // --- host interface -------------------------------------------------
    /// Doorbell to command in the controller: SQ entry fetch (a fixed
    /// delay, pipelined: it takes no resource).
    pub fetch_ns: u64,
    /// Completion entry write and the host noticing it (fixed, pipelined).
    pub post_ns: u64,
    /// Device-to-host data (reads, reports), shared by all commands.
    pub link_to_host_mbps: u64,
    /// Host-to-device data (writes, appends), shared by all commands. Lower
    /// than the other direction: the device must request every byte with
    /// read requests of limited number in flight.
    pub link_from_host_mbps: u64,
    /// Fetching a PRP list from host memory, for transfers over two memory
    /// pages, before the data moves.
    pub prp_list_ns: u64,
    /// Device-to-host DMA: the engine's own work per command before the
    /// command's data moves (its descriptors, the completion's ordering
    /// behind the data), taking the link to the host like the data does.
    /// With the byte rate it sets the read ceilings at every request
    /// size. 0: none.
    #[serde(default)]
    pub link_to_host_command_ns: u64,
    /// Device-to-host DMA: more of that work for a command whose data
    /// needs a PRP list (walking the list's entries), on top of
    /// `link_to_host_command_ns`. 0: none.
    #[serde(default)]
    pub link_to_host_list_ns: u64,

    // --- controller -----------------------------------------------------
    /// Processing units (firmware cores) executing commands; each command
    /// occupies one for its processing costs below, first come first
    /// served, and runs to completion there (its processing overlapping
    /// the data transfer included) before the unit takes the next.
    pub processing_units: u32,
    /// Read: processing before the flash reads.
    pub read_ns: u64,
    /// Write: processing before the data transfer.
    pub write_ns: u64,
    /// Write: processing overlapping the data transfer (buffer and mapping
    /// bookkeeping), right after `write_ns` on the same unit.
    pub write_overlap_ns: u64,
    /// Zone Append: processing before the data transfer.
    pub append_ns: u64,
    /// Zone Append: processing overlapping the data transfer, right after
    /// `append_ns` on the same unit.
    pub append_overlap_ns: u64,
    /// Zone Append: assigning the write pointer once the data is in the
    /// buffer; appends to one zone take turns here.
    pub append_serial_ns: u64,
    /// Write and Zone Append with logical blocks smaller than 4 KiB: extra
    /// processing per logical block, on top of `write_ns` / `append_ns`
    /// (the controller maps 4 KiB units and handles each smaller block on
    /// its own, merging it into its unit). Nothing for 4 KiB or larger
    /// blocks. 0: no such cost.
    #[serde(default)]
    pub small_lba_ns: u64,
    /// Extra processing for the first write or append to a zone it opens
    /// implicitly (allocating the zone's write resources).
    pub implicit_open_ns: u64,
    /// Wait of a write or Zone Append to another zone than the one whose
    /// write context (write pointer, stripe and buffer slot) the
    /// controller holds, before its processing: fetching that zone's
    /// context. Latency, not processing: the processing unit serves
    /// other commands meanwhile, so writes taking turns over zones each
    /// wait for it while the many-zone ceiling stays the unit's. The
    /// controller holds the context of the zone written last, or of one
    /// zone opened explicitly; closing, finishing or resetting that zone
    /// drops it. 0: none.
    #[serde(default)]
    pub zone_switch_ns: u64,
    /// Flush (the write buffer is power-loss protected: nothing drains).
    pub flush_ns: u64,
    /// Write Zeroes, Copy and other commands: processing.
    pub other_ns: u64,
    /// Zone Management Receive: processing (plus its data transfer).
    pub report_ns: u64,
    /// Explicit Open Zone.
    pub open_ns: u64,
    /// Close Zone.
    pub close_ns: u64,
    /// Close Zone of a zone with data in the write buffer (saving its
    /// write context), on top of `close_ns`.
    pub close_buffered_ns: u64,
    /// Finish Zone: processing (an Empty zone needs nothing more; otherwise
    /// the rest of the zone is padded through the write path).
    pub finish_ns: u64,
    /// Reset Zone: processing on the processing units.
    pub reset_ns: u64,
    /// Firmware housekeeping (mapping and buffer bookkeeping deferred and
    /// run in batches) that a processing unit runs between data commands
    /// (reads, writes, appends, copies): the fraction of them whose
    /// processing waits for such a task. 0: none.
    #[serde(default)]
    pub housekeeping_fraction: f64,
    /// Mean length of one housekeeping task: exponentially distributed,
    /// the same for the same data command of the same run (they are
    /// counted), so runs repeat exactly.
    #[serde(default)]
    pub housekeeping_mean_ns: u64,
    /// Reset Zone: the zone's metadata update, on the management unit (a
    /// core of its own, so resets do not hold up I/O), before the erases.
    pub reset_metadata_us: u64,

    // --- flash ------------------------------------------------------------
    /// Flash channels (buses); die `d` sits on channel `d % channels`.
    pub channels: u32,
    /// Dies on each channel.
    pub dies_per_channel: u32,
    /// Planes per die, read and programmed together (at most
    /// [`MAX_PLANES`]).
    pub planes: u32,
    /// Flash page size in KiB.
    pub page_kib: u32,
    /// Bits per cell: pages of one word line programmed in one operation
    /// (3 = TLC one-shot programming).
    pub bits_per_cell: u32,
    /// Channel transfer rate.
    pub channel_mbps: u64,
    /// Per channel transfer overhead (command and address cycles, status
    /// polling).
    pub channel_overhead_ns: u64,
    /// Array read time (tR) by page level of the word line (LSB, CSB, MSB
    /// for TLC): `bits_per_cell` entries.
    pub read_us: Vec<f64>,
    /// Program time of one program unit (tPROG): `planes` × `bits_per_cell`
    /// pages of `page_kib`.
    pub program_us: u64,
    /// Spread of program times: each program takes `program_us` × (1 ± up
    /// to this fraction), the same for the same place in the same zone every
    /// run (word lines differ in how many program pulses they need). 0 for
    /// identical programs.
    #[serde(default)]
    pub program_variation: f64,
    /// Opening an erase block: a die's first program into a block of a
    /// zone takes this much longer (the firmware records the block's
    /// allocation and programs its header before the data). A zone's
    /// units rotate over its dies, so every die opens its next block in
    /// turn, once per `block_kib` × dies of the zone's data. 0: none.
    #[serde(default)]
    pub block_open_us: u64,
    /// Binding a zone's next stripe of erase blocks (an erase block on
    /// each of its `zone_stripe_dies` dies, `block_kib` × dies of data):
    /// the write that enters the stripe waits this long for the
    /// controller's management unit (zone metadata work), which records
    /// the blocks. The first stripe is bound when the zone opens. Costs no
    /// die time: programs of buffered data go on meanwhile. 0: none.
    #[serde(default)]
    pub stripe_open_us: u64,
    /// Program and erase suspend: a read for a die busy programming or
    /// erasing suspends it, waits this long, reads, and the operation
    /// resumes after this long again with the time it still needed.
    #[serde(default)]
    pub suspend_us: u64,
    /// Times one program or erase may be suspended; past that, reads wait
    /// for it to end. 0: reads always wait (no suspend).
    #[serde(default)]
    pub suspend_limit: u32,
    /// Erase suspend, when it differs from program suspend: a read for a
    /// die busy with a reset's work (erasing a block, or programming the
    /// rest of a partly programmed block before its erase) suspends it,
    /// waits this long, reads, and the erase resumes after this long again.
    /// Absent: `suspend_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erase_suspend_us: Option<f64>,
    /// Times one erase may be suspended; past that, reads wait for it to
    /// end. 0: reads always wait. Absent: `suspend_limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erase_suspend_limit: Option<u32>,
    /// Erase progress between suspends: an erase (or a reset's block
    /// close) started or resumed is not suspended again before it has run
    /// this long; a read arriving earlier waits for that moment, and the
    /// reads waiting then are served in one suspension. Without it an
    /// erase under a steady stream of reads gives way to each of them and
    /// reads never wait for one. Absent or 0: no minimum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erase_resume_min_us: Option<f64>,
    /// Erase time of one erase block (tBERS).
    pub erase_us: u64,
    /// Spread of erase times between resets: the erases of one reset take
    /// `erase_us` × (1 + e), `e` uniform in [0, this), one draw per reset of a zone (from the zone and the resets so far,
    /// so runs repeat exactly). The blocks a zone holds from its first
    /// write to its reset come from the free pool with their own wear;
    /// worn blocks need more erase pulses, the blocks of one zone alike. 0:
    /// every erase takes `erase_us`.
    #[serde(default)]
    pub erase_variation: f64,
    /// Erase block of one die in KiB: a whole number of program units.
    pub block_kib: u32,
    /// Closing a partly programmed erase block before it can be erased
    /// (programming its rest with filler), per die, when a zone is reset
    /// without having been finished or filled.
    pub close_block_us: u64,

    // --- write buffer and zones ---------------------------------------
    /// Write buffer in KiB. A write completes once its data is in the
    /// buffer; the buffer drains to the dies a program unit at a time;
    /// when it is full, writes wait for room.
    pub write_buffer_kib: u32,
    /// Dies a zone is striped over: its consecutive program units rotate
    /// over this many dies (all dies when equal to their number).
    pub zone_stripe_dies: u32,
    /// Unit in KiB that a zone's consecutive data rotates over its dies in
    /// (a page, or a page on every plane), a divisor of the program unit.
    /// Each die's program unit then gathers its pages from several stripe
    /// rows (program unit / this): a zone stages a stripe of program units
    /// (one per die) before its dies program, in a stripe area of its own
    /// beside the write buffer (the buffer holds one program unit of it),
    /// the dies' units staggered by a chunk from one die to the next so
    /// that some complete in every stripe row, and a large read of
    /// consecutive data is spread over dies and their channels. Absent: the program unit (each program unit
    /// holds consecutive data of the zone, on one die).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_stripe_kib: Option<u32>,
}

impl TimingProfile {
    /// Dies in the device.
    pub fn dies(&self) -> u32 {
        self.channels * self.dies_per_channel
    }

    /// Bytes of one program unit (what one die programs at once, and the
    /// unit a zone's data is striped in).
    pub fn program_unit_bytes(&self) -> u64 {
        self.page_kib as u64 * 1024 * self.planes as u64 * self.bits_per_cell as u64
    }

    /// Bytes of the unit a zone's data rotates over its dies in
    /// (`zone_stripe_kib`, or the program unit).
    pub fn stripe_unit_bytes(&self) -> u64 {
        self.zone_stripe_kib.map_or(self.program_unit_bytes(), |k| k as u64 * 1024)
    }

    /// Checks the values; `max_transfer` is the largest data transfer
    /// (MDTS) in bytes.
    pub fn validate(&self, max_transfer: u64) -> Result<(), String> {
        let nonzero = [
            ("link_to_host_mbps", self.link_to_host_mbps),
            ("link_from_host_mbps", self.link_from_host_mbps),
            ("processing_units", self.processing_units as u64),
            ("channels", self.channels as u64),
            ("dies_per_channel", self.dies_per_channel as u64),
            ("planes", self.planes as u64),
            ("page_kib", self.page_kib as u64),
            ("bits_per_cell", self.bits_per_cell as u64),
            ("channel_mbps", self.channel_mbps),
            ("block_kib", self.block_kib as u64),
            ("write_buffer_kib", self.write_buffer_kib as u64),
            ("zone_stripe_dies", self.zone_stripe_dies as u64),
        ];
        for (name, v) in nonzero {
            if v == 0 {
                return Err(format!("timing.{name} must be at least 1"));
            }
        }
        if self.planes > MAX_PLANES {
            // Traces name the planes an operation covers in a 32-bit mask.
            return Err(format!("timing.planes must be at most {MAX_PLANES}"));
        }
        if self.processing_units > 64 {
            return Err("timing.processing_units must be at most 64".into());
        }
        if self.dies() > 4096 {
            return Err("timing: at most 4096 dies (channels × dies_per_channel)".into());
        }
        if self.zone_stripe_dies > self.dies() {
            return Err("timing.zone_stripe_dies exceeds the number of dies".into());
        }
        if self.read_us.len() != self.bits_per_cell as usize
            || self.read_us.iter().any(|t| !t.is_finite() || *t < 0.0)
        {
            return Err(format!(
                "timing.read_us needs bits_per_cell ({}) non-negative times",
                self.bits_per_cell
            ));
        }
        if self.erase_suspend_us.is_some_and(|t| !t.is_finite() || t < 0.0) {
            return Err("timing.erase_suspend_us must be a non-negative time".into());
        }
        if self.erase_resume_min_us.is_some_and(|t| !t.is_finite() || t < 0.0) {
            return Err("timing.erase_resume_min_us must be a non-negative time".into());
        }
        if !(0.0..=1.0).contains(&self.housekeeping_fraction) {
            return Err("timing.housekeeping_fraction must be in 0..=1".into());
        }
        if !(0.0..=1.0).contains(&self.erase_variation) {
            return Err("timing.erase_variation must be in 0..=1".into());
        }
        if !(0.0..1.0).contains(&self.program_variation) {
            return Err("timing.program_variation must be in 0..1".into());
        }
        let unit = self.program_unit_bytes();
        if !(self.block_kib as u64 * 1024).is_multiple_of(unit) {
            return Err(format!(
                "timing.block_kib must be a multiple of the program unit ({} KiB)",
                unit / 1024
            ));
        }
        let stripe = self.stripe_unit_bytes();
        if stripe < 4096 || !unit.is_multiple_of(stripe) {
            return Err(format!(
                "timing.zone_stripe_kib must be at least 4 and divide the program unit ({} KiB)",
                unit / 1024
            ));
        }
        let buffer = self.write_buffer_kib as u64 * 1024;
        if buffer < unit + max_transfer {
            return Err(format!(
                "timing.write_buffer_kib must hold a program unit and the largest transfer ({} KiB)",
                (unit + max_transfer) / 1024
            ));
        }
        Ok(())
    }
}
