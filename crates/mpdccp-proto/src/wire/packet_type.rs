//! The DCCP packet type, the 4-bit Type field of the generic header
//! (RFC 4340 §5.1): what each type carries and how long its sub-header is.

use super::WireError;

/// DCCP packet types (RFC 4340 §5.1, Table 1). Types 10–15 are reserved and
/// rejected with [`WireError::ReservedType`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PacketType {
    Request = 0,
    Response = 1,
    Data = 2,
    Ack = 3,
    DataAck = 4,
    CloseReq = 5,
    Close = 6,
    Reset = 7,
    Sync = 8,
    SyncAck = 9,
}

impl PacketType {
    pub fn from_u8(v: u8) -> Result<PacketType, WireError> {
        Ok(match v {
            0 => PacketType::Request,
            1 => PacketType::Response,
            2 => PacketType::Data,
            3 => PacketType::Ack,
            4 => PacketType::DataAck,
            5 => PacketType::CloseReq,
            6 => PacketType::Close,
            7 => PacketType::Reset,
            8 => PacketType::Sync,
            9 => PacketType::SyncAck,
            other => return Err(WireError::ReservedType(other)),
        })
    }

    /// Whether the type carries an Acknowledgement Number sub-header
    /// (§5.1: all but Request and Data).
    pub fn has_ack(self) -> bool {
        !matches!(self, PacketType::Request | PacketType::Data)
    }

    /// Whether the type may carry application data (§5.1: Request,
    /// Response, Data, DataAck; Ack, CloseReq, Close, Reset, Sync, SyncAck
    /// may carry data that the receiver ignores — we emit none).
    pub fn carries_data(self) -> bool {
        matches!(self, PacketType::Data | PacketType::DataAck)
    }

    /// Whether X=0 (24-bit sequence numbers) is allowed (§5.1: only Data,
    /// Ack and DataAck; other types with X=0 MUST be ignored).
    pub fn allows_short_seq(self) -> bool {
        matches!(
            self,
            PacketType::Data | PacketType::Ack | PacketType::DataAck
        )
    }

    /// Length of the type-specific sub-header after the generic header.
    pub fn subheader_len(self, short_seq: bool) -> usize {
        let ack = if short_seq { 4 } else { 8 };
        match self {
            PacketType::Request => 4,
            PacketType::Data => 0,
            PacketType::Response => ack + 4,
            PacketType::Reset => ack + 4,
            _ => ack,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PacketType::Request => "Request",
            PacketType::Response => "Response",
            PacketType::Data => "Data",
            PacketType::Ack => "Ack",
            PacketType::DataAck => "DataAck",
            PacketType::CloseReq => "CloseReq",
            PacketType::Close => "Close",
            PacketType::Reset => "Reset",
            PacketType::Sync => "Sync",
            PacketType::SyncAck => "SyncAck",
        }
    }
}
