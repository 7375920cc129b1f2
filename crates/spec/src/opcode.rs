//! Command opcodes: admin, NVM command set and Zoned Namespace command set.

/// Admin command opcodes (submitted to the admin queue, QID 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AdminOpcode {
    /// 00h Delete I/O Submission Queue.
    DeleteIoSq = 0x00,
    /// 01h Create I/O Submission Queue.
    CreateIoSq = 0x01,
    /// 02h Get Log Page.
    GetLogPage = 0x02,
    /// 04h Delete I/O Completion Queue.
    DeleteIoCq = 0x04,
    /// 05h Create I/O Completion Queue.
    CreateIoCq = 0x05,
    /// 06h Identify.
    Identify = 0x06,
    /// 08h Abort.
    Abort = 0x08,
    /// 09h Set Features.
    SetFeatures = 0x09,
    /// 0Ah Get Features.
    GetFeatures = 0x0A,
    /// 0Ch Asynchronous Event Request.
    AsyncEventRequest = 0x0C,
    /// 18h Keep Alive.
    KeepAlive = 0x18,
}

impl AdminOpcode {
    /// Decodes an admin opcode; `None` for opcodes this crate does not name.
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            0x00 => Self::DeleteIoSq,
            0x01 => Self::CreateIoSq,
            0x02 => Self::GetLogPage,
            0x04 => Self::DeleteIoCq,
            0x05 => Self::CreateIoCq,
            0x06 => Self::Identify,
            0x08 => Self::Abort,
            0x09 => Self::SetFeatures,
            0x0A => Self::GetFeatures,
            0x0C => Self::AsyncEventRequest,
            0x18 => Self::KeepAlive,
            _ => return None,
        })
    }
}

/// I/O command opcodes of the NVM and Zoned Namespace command sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum IoOpcode {
    /// 00h Flush.
    Flush = 0x00,
    /// 01h Write.
    Write = 0x01,
    /// 02h Read.
    Read = 0x02,
    /// 04h Write Uncorrectable.
    WriteUncorrectable = 0x04,
    /// 05h Compare.
    Compare = 0x05,
    /// 08h Write Zeroes.
    WriteZeroes = 0x08,
    /// 09h Dataset Management.
    DatasetManagement = 0x09,
    /// 0Ch Verify.
    Verify = 0x0C,
    /// 12h I/O Management Receive (Flexible Data Placement: Reclaim Unit
    /// Handle Status).
    IoManagementReceive = 0x12,
    /// 19h Copy.
    Copy = 0x19,
    /// 1Dh I/O Management Send (Flexible Data Placement: Reclaim Unit
    /// Handle Update).
    IoManagementSend = 0x1D,
    /// 79h Zone Management Send (ZNS).
    ZoneMgmtSend = 0x79,
    /// 7Ah Zone Management Receive (ZNS).
    ZoneMgmtRecv = 0x7A,
    /// 7Dh Zone Append (ZNS).
    ZoneAppend = 0x7D,
}

impl IoOpcode {
    /// Decodes an I/O opcode; `None` for opcodes this crate does not name.
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            0x00 => Self::Flush,
            0x01 => Self::Write,
            0x02 => Self::Read,
            0x04 => Self::WriteUncorrectable,
            0x05 => Self::Compare,
            0x08 => Self::WriteZeroes,
            0x09 => Self::DatasetManagement,
            0x0C => Self::Verify,
            0x12 => Self::IoManagementReceive,
            0x19 => Self::Copy,
            0x1D => Self::IoManagementSend,
            0x79 => Self::ZoneMgmtSend,
            0x7A => Self::ZoneMgmtRecv,
            0x7D => Self::ZoneAppend,
            _ => return None,
        })
    }

    /// Data transfer direction encoded in opcode bits 1:0
    /// (01b host to controller, 10b controller to host).
    pub const fn transfer(self) -> DataDirection {
        DataDirection::of_opcode(self as u8)
    }
}

/// Direction of a command's data transfer, from the opcode's low two bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataDirection {
    /// 00b: no data.
    None,
    /// 01b: host to controller.
    HostToController,
    /// 10b: controller to host.
    ControllerToHost,
    /// 11b: both.
    Bidirectional,
}

impl DataDirection {
    /// Decodes bits 1:0 of any opcode.
    pub const fn of_opcode(op: u8) -> Self {
        match op & 3 {
            0 => Self::None,
            1 => Self::HostToController,
            2 => Self::ControllerToHost,
            _ => Self::Bidirectional,
        }
    }
}

/// Command Set Identifier (CSI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[repr(u8)]
pub enum CommandSetId {
    /// 00h NVM Command Set.
    Nvm = 0x00,
    /// 01h Key Value Command Set.
    KeyValue = 0x01,
    /// 02h Zoned Namespace Command Set.
    Zoned = 0x02,
}

impl CommandSetId {
    /// Decodes a CSI; `None` for values not named here.
    pub const fn from_raw(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Nvm),
            1 => Some(Self::KeyValue),
            2 => Some(Self::Zoned),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_have_spec_values_and_directions() {
        assert_eq!(IoOpcode::ZoneAppend as u8, 0x7D);
        assert_eq!(IoOpcode::ZoneAppend.transfer(), DataDirection::HostToController);
        assert_eq!(IoOpcode::ZoneMgmtRecv.transfer(), DataDirection::ControllerToHost);
        assert_eq!(IoOpcode::ZoneMgmtSend.transfer(), DataDirection::HostToController);
        assert_eq!(IoOpcode::Read.transfer(), DataDirection::ControllerToHost);
        assert_eq!(IoOpcode::Copy.transfer(), DataDirection::HostToController);
        assert_eq!(IoOpcode::from_raw(0x12), Some(IoOpcode::IoManagementReceive));
        assert_eq!(IoOpcode::IoManagementReceive.transfer(), DataDirection::ControllerToHost);
        assert_eq!(IoOpcode::from_raw(0x1D), Some(IoOpcode::IoManagementSend));
        assert_eq!(IoOpcode::IoManagementSend.transfer(), DataDirection::HostToController);
        for v in 0..=255u8 {
            if let Some(op) = IoOpcode::from_raw(v) {
                assert_eq!(op as u8, v);
            }
            if let Some(op) = AdminOpcode::from_raw(v) {
                assert_eq!(op as u8, v);
            }
        }
    }
}
