//! How handshake messages ride in DCCP options (RFC 9897 §3.2.4, §3.2.11).
//!
//! Key type 255 of MP_KEY has exactly 64 bytes of key data (the RFC's key
//! type table; main's wire code enforces it), and MP_EXP carries up to 252
//! opaque bytes. A message that goes with an MP_KEY (the Init in the
//! DCCP-Request, the Response in the DCCP-Response) is split: its first 64
//! bytes are the key data of key type 255, the rest is the MP_EXP of the same
//! packet. A message without MP_KEY (the cookie reply in the DCCP-Reset, the
//! Confirm in the DCCP-Ack) is the MP_EXP alone. The receiver concatenates.

use super::AuthError;

/// Key data length of MP_KEY key type 255.
pub const KEY_DATA_LEN: usize = 64;
/// Most bytes one MP_EXP carries (255-byte option minus its 3-byte header).
pub const EXP_MAX: usize = 252;

/// A message split for MP_KEY key type 255 + MP_EXP.
pub fn split(msg: &[u8]) -> Result<([u8; KEY_DATA_LEN], &[u8]), AuthError> {
    if msg.len() < KEY_DATA_LEN || msg.len() - KEY_DATA_LEN > EXP_MAX {
        return Err(AuthError::Malformed);
    }
    let mut key = [0u8; KEY_DATA_LEN];
    key.copy_from_slice(&msg[..KEY_DATA_LEN]);
    Ok((key, &msg[KEY_DATA_LEN..]))
}

/// The message from the packet's key type 255 data and its MP_EXP (either
/// may be absent; a bounded result).
pub fn join(key_data: Option<&[u8]>, exp: Option<&[u8]>) -> Result<Vec<u8>, AuthError> {
    let key = key_data.unwrap_or_default();
    let exp = exp.unwrap_or_default();
    if key.len() > KEY_DATA_LEN || exp.len() > EXP_MAX || key.len() + exp.len() == 0 {
        return Err(AuthError::Malformed);
    }
    Ok([key, exp].concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_join_are_inverse_and_bounded() {
        let msg: Vec<u8> = (0..137u8).collect();
        let (k, e) = split(&msg).unwrap();
        assert_eq!(e.len(), 73);
        assert_eq!(join(Some(&k), Some(e)).unwrap(), msg);
        assert_eq!(split(&msg[..63]), Err(AuthError::Malformed));
        assert!(split(&vec![0u8; 64 + 253]).is_err());
        assert_eq!(join(None, Some(&[4, 5])).unwrap(), vec![4, 5]);
        assert_eq!(join(None, None), Err(AuthError::Malformed));
        assert!(join(Some(&[0; 65]), None).is_err());
    }
}
