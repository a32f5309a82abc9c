-- mpdccp.lua: a Wireshark/tshark dissector for Multipath DCCP as published
-- in RFC 9897, written for the mpdccp project.
--
-- Decodes
--   * DCCP (RFC 4340) with every generic-header and type-specific field and
--     its options (feature negotiation, Ack Vector, timestamps, ...);
--   * the Multipath option 46 with every RFC 9897 sub-option and field:
--     MP_CONFIRM (recursively), MP_JOIN, MP_FAST_CLOSE, MP_KEY, MP_SEQ,
--     MP_HMAC, MP_RTT, MP_ADDADDR, MP_REMOVEADDR, MP_PRIO, MP_CLOSE, MP_EXP;
--   * the Multipath Capable feature (number 10) in Change/Confirm options;
--   * DCCP-in-UDP (RFC 6773) on a configurable UDP port;
--   * U-DCCP (draft-amend-tsvwg-dccp-udp-header-conversion-01) on a
--     configurable UDP port, in either nibble order of octet 9.
--
-- Stock Wireshark 4.0 shows option 46 as "Reserved (46)" and 4.4 decodes a
-- pre-RFC layout, so this script takes over IP protocol 33 (preference
-- "native") and decodes DCCP itself.
--
-- Load it with  tshark -X lua_script:tools/wireshark/mpdccp.lua ...
-- or copy it to the personal Lua plugins folder (Help > About Wireshark >
-- Folders). Display filters: mpdccp, mpdccp.mp.seq, mpdccp.mp.key.ci, ...
--
-- Preferences (Edit > Preferences > Protocols > MPDCCP, or tshark -o):
--   mpdccp.native          take over IP protocol 33 (default on)
--   mpdccp.udp_port        RFC 6773 DCCP-in-UDP port (default 6511, 0 = off)
--   mpdccp.udccp_port      U-DCCP UDP port (default 0 = off)
--   mpdccp.udccp_ref_nibbles  U-DCCP octet 9 as the Telekom module writes it
--                          (CCVal high, Type low) instead of Figure 5
--   mpdccp.key_layout      MP_KEY layout: RFC 9897 (resvd, CI, keys) or the
--                          reference kernel 5.10 (keys only, no CI)
--   mpdccp.ref_addaddr_v4_reversed  show MP_ADDADDR IPv4 byte-reversed as
--                          the reference kernel writes it on x86

local p = Proto("mpdccp", "Multipath DCCP (RFC 9897)")

------------------------------------------------------------------------------
-- Value strings
------------------------------------------------------------------------------
local packet_types = {
    [0] = "DCCP-Request", [1] = "DCCP-Response", [2] = "DCCP-Data",
    [3] = "DCCP-Ack", [4] = "DCCP-DataAck", [5] = "DCCP-CloseReq",
    [6] = "DCCP-Close", [7] = "DCCP-Reset", [8] = "DCCP-Sync",
    [9] = "DCCP-SyncAck",
}
local reset_codes = {
    [0] = "Unspecified", [1] = "Closed", [2] = "Aborted", [3] = "No Connection",
    [4] = "Packet Error", [5] = "Option Error", [6] = "Mandatory Error",
    [7] = "Connection Refused", [8] = "Bad Service Code", [9] = "Too Busy",
    [10] = "Bad Init Cookie", [11] = "Aggression Penalty",
    [13] = "MP-DCCP Fast Close",
}
local option_types = {
    [0] = "Padding", [1] = "Mandatory", [2] = "Slow Receiver",
    [32] = "Change L", [33] = "Confirm L", [34] = "Change R", [35] = "Confirm R",
    [36] = "Init Cookie", [37] = "NDP Count", [38] = "Ack Vector [Nonce 0]",
    [39] = "Ack Vector [Nonce 1]", [40] = "Data Dropped", [41] = "Timestamp",
    [42] = "Timestamp Echo", [43] = "Elapsed Time", [44] = "Data Checksum",
    [46] = "Multipath",
}
local features = {
    [1] = "CCID", [2] = "Allow Short Seqnos", [3] = "Sequence Window",
    [4] = "ECN Incapable", [5] = "Ack Ratio", [6] = "Send Ack Vector",
    [7] = "Send NDP Count", [8] = "Minimum Checksum Coverage",
    [9] = "Check Data Checksum", [10] = "Multipath Capable",
}
local mp_subtypes = {
    [0] = "MP_CONFIRM", [1] = "MP_JOIN", [2] = "MP_FAST_CLOSE", [3] = "MP_KEY",
    [4] = "MP_SEQ", [5] = "MP_HMAC", [6] = "MP_RTT", [7] = "MP_ADDADDR",
    [8] = "MP_REMOVEADDR", [9] = "MP_PRIO", [10] = "MP_CLOSE", [11] = "MP_EXP",
}
local key_types = { [0] = "Plain Text", [255] = "Experimental" }
local key_lengths = { [0] = 8, [255] = 64 } -- RFC 9897 §3.2.4
local rtt_types = { [0] = "Raw RTT", [1] = "Min RTT", [2] = "Max RTT", [3] = "Smooth RTT" }
local prio_names = { [0] = "Do not use", [1] = "Standby", [2] = "Secondary" }

------------------------------------------------------------------------------
-- Fields
------------------------------------------------------------------------------
local f = {
    srcport = ProtoField.uint16("mpdccp.srcport", "Source Port"),
    dstport = ProtoField.uint16("mpdccp.dstport", "Destination Port"),
    data_offset = ProtoField.uint8("mpdccp.data_offset", "Data Offset (words)"),
    ccval = ProtoField.uint8("mpdccp.ccval", "CCVal"),
    cscov = ProtoField.uint8("mpdccp.cscov", "Checksum Coverage"),
    checksum = ProtoField.uint16("mpdccp.checksum", "Checksum", base.HEX),
    udp_length = ProtoField.uint16("mpdccp.udccp.length", "U-DCCP (UDP) Length"),
    type = ProtoField.uint8("mpdccp.type", "Type", base.DEC, packet_types),
    x = ProtoField.bool("mpdccp.x", "Extended Sequence Numbers"),
    seq = ProtoField.uint64("mpdccp.seq", "Sequence Number"),
    ack = ProtoField.uint64("mpdccp.ack", "Acknowledgement Number"),
    service_code = ProtoField.uint32("mpdccp.service_code", "Service Code", base.HEX),
    reset_code = ProtoField.uint8("mpdccp.reset_code", "Reset Code", base.DEC, reset_codes),
    reset_data = ProtoField.bytes("mpdccp.reset_data", "Reset Data"),
    encap = ProtoField.string("mpdccp.encap", "Transport"),
    option = ProtoField.uint8("mpdccp.option", "Option Type", base.DEC, option_types),
    option_len = ProtoField.uint8("mpdccp.option.length", "Option Length"),
    option_data = ProtoField.bytes("mpdccp.option.data", "Option Data"),
    feat_number = ProtoField.uint8("mpdccp.feature", "Feature", base.DEC, features),
    feat_value = ProtoField.bytes("mpdccp.feature.value", "Feature Value"),
    mp_capable = ProtoField.uint8("mpdccp.mp_capable.version", "Multipath Capable Version"),
    mp_capable_unassigned = ProtoField.uint8("mpdccp.mp_capable.unassigned", "Unassigned bits", base.HEX),
    elapsed = ProtoField.uint32("mpdccp.elapsed_time", "Elapsed Time"),
    timestamp = ProtoField.uint32("mpdccp.timestamp", "Timestamp"),
    payload = ProtoField.bytes("mpdccp.payload", "Application Data"),

    mp = ProtoField.uint8("mpdccp.mp.subtype", "MP_OPT", base.DEC, mp_subtypes),
    mp_len = ProtoField.uint8("mpdccp.mp.length", "Length"),
    confirm_count = ProtoField.uint8("mpdccp.mp.confirm.items", "Confirmed options"),
    join_addr_id = ProtoField.uint8("mpdccp.mp.join.addr_id", "Address ID"),
    join_ci = ProtoField.uint32("mpdccp.mp.join.ci", "Connection Identifier", base.HEX),
    join_nonce = ProtoField.uint32("mpdccp.mp.join.nonce", "Nonce", base.HEX),
    fast_close_key = ProtoField.bytes("mpdccp.mp.fast_close.key", "Key Data"),
    key_resvd = ProtoField.uint8("mpdccp.mp.key.resvd", "Reserved", base.HEX),
    key_ci = ProtoField.uint32("mpdccp.mp.key.ci", "Connection Identifier", base.HEX),
    key_type = ProtoField.uint8("mpdccp.mp.key.type", "Key Type", base.DEC, key_types),
    key_data = ProtoField.bytes("mpdccp.mp.key.data", "Key Data"),
    mp_seq = ProtoField.uint64("mpdccp.mp.seq", "Multipath Sequence Number"),
    hmac = ProtoField.bytes("mpdccp.mp.hmac", "HMAC-SHA256 (leftmost 20 bytes)"),
    rtt_type = ProtoField.uint8("mpdccp.mp.rtt.type", "RTT Type", base.DEC, rtt_types),
    rtt = ProtoField.uint32("mpdccp.mp.rtt.value", "RTT (ms)"),
    rtt_age = ProtoField.uint32("mpdccp.mp.rtt.age", "Age (ms)"),
    add_id = ProtoField.uint8("mpdccp.mp.addaddr.id", "Address ID"),
    add_nonce = ProtoField.uint32("mpdccp.mp.addaddr.nonce", "Nonce", base.HEX),
    add_v4 = ProtoField.ipv4("mpdccp.mp.addaddr.ipv4", "Address"),
    add_v6 = ProtoField.ipv6("mpdccp.mp.addaddr.ipv6", "Address"),
    add_port = ProtoField.uint16("mpdccp.mp.addaddr.port", "Port"),
    rem_id = ProtoField.uint8("mpdccp.mp.removeaddr.id", "Address ID"),
    rem_nonce = ProtoField.uint32("mpdccp.mp.removeaddr.nonce", "Nonce", base.HEX),
    prio = ProtoField.uint8("mpdccp.mp.prio", "Priority", base.DEC, nil, 0x0f),
    prio_resvd = ProtoField.uint8("mpdccp.mp.prio.resvd", "Reserved", base.HEX, nil, 0xf0),
    close_key = ProtoField.bytes("mpdccp.mp.close.key", "Key Data"),
    exp_data = ProtoField.bytes("mpdccp.mp.exp.data", "Data"),
}
local field_list = {}
for _, v in pairs(f) do field_list[#field_list + 1] = v end
p.fields = field_list

local ef_malformed = ProtoExpert.new("mpdccp.malformed", "Malformed field",
    expert.group.MALFORMED, expert.severity.ERROR)
local ef_note = ProtoExpert.new("mpdccp.note", "Not RFC 9897",
    expert.group.PROTOCOL, expert.severity.WARN)
p.experts = { ef_malformed, ef_note }

------------------------------------------------------------------------------
-- Preferences
------------------------------------------------------------------------------
local KEY_RFC, KEY_K510 = 0, 1
p.prefs.native = Pref.bool("Decode native DCCP (IP protocol 33)", true,
    "Take over IP protocol 33 from the built-in DCCP dissector")
p.prefs.udp_port = Pref.uint("DCCP-in-UDP (RFC 6773) port", 6511,
    "UDP port of RFC 6773 encapsulation (0 = off)")
p.prefs.udccp_port = Pref.uint("U-DCCP port", 0,
    "UDP port on which datagrams are U-DCCP converted DCCP (0 = off)")
p.prefs.udccp_ref_nibbles = Pref.bool("U-DCCP: CCVal in the high nibble of octet 9", false,
    "The Telekom u-dccp module's bitfields put CCVal high and Type low; Figure 5 of the draft has Type high")
p.prefs.key_layout = Pref.enum("MP_KEY layout", KEY_RFC, "MP_KEY layout",
    { { 1, "RFC 9897 (reserved, CI, keys)", KEY_RFC },
      { 2, "Reference kernel 5.10 (keys only, no CI)", KEY_K510 } }, false)
p.prefs.ref_addaddr_v4_reversed = Pref.bool("MP_ADDADDR IPv4 byte-reversed (reference kernel)", false,
    "The reference kernel writes the IPv4 address of MP_ADDADDR byte-reversed on x86")

------------------------------------------------------------------------------
-- Helpers
------------------------------------------------------------------------------
local function hi(b) return math.floor(b / 16) end
local function lo(b) return b % 16 end

local function add_u64(tree, field, range)
    return tree:add(field, range, range:uint64())
end

------------------------------------------------------------------------------
-- Multipath option 46
------------------------------------------------------------------------------
local dissect_mp -- forward (MP_CONFIRM recurses)

local function dissect_mp_key(tvb, t, off, n)
    local kstart = off
    if p.prefs.key_layout == KEY_RFC then
        if n < 5 then
            t:add_proto_expert_info(ef_malformed, "MP_KEY shorter than reserved + CI")
            return
        end
        t:add(f.key_resvd, tvb(off, 1))
        t:add(f.key_ci, tvb(off + 1, 4))
        kstart = off + 5
    end
    local pos, stop = kstart, off + n
    if pos >= stop then
        t:add_proto_expert_info(ef_malformed, "MP_KEY without a key")
    end
    while pos < stop do
        local kt = tvb(pos, 1):uint()
        local kl = key_lengths[kt]
        if kl == nil then
            t:add(f.key_type, tvb(pos, 1))
            t:add_proto_expert_info(ef_malformed,
                string.format("Key Type %d is reserved (RFC 9897 §3.2.4): key list cannot be delimited", kt))
            return
        end
        if pos + 1 + kl > stop then
            t:add(f.key_type, tvb(pos, 1))
            t:add_proto_expert_info(ef_malformed, "Key Data truncated")
            return
        end
        local kt_tree = t:add(tvb(pos, 1 + kl), string.format("Key: %s", key_types[kt]))
        kt_tree:add(f.key_type, tvb(pos, 1))
        kt_tree:add(f.key_data, tvb(pos + 1, kl))
        pos = pos + 1 + kl
    end
end

local function dissect_addaddr(tvb, t, off, n)
    -- RFC form: id, nonce(4), addr(4|16), [port]; the draft/reference form
    -- has no nonce. The eight body lengths are distinct.
    local layouts = {
        [9] = { 4, 4, 0 }, [11] = { 4, 4, 2 }, [21] = { 4, 16, 0 }, [23] = { 4, 16, 2 },
        [5] = { 0, 4, 0 }, [7] = { 0, 4, 2 }, [17] = { 0, 16, 0 }, [19] = { 0, 16, 2 },
    }
    local l = layouts[n]
    if l == nil then
        t:add_proto_expert_info(ef_malformed, string.format("MP_ADDADDR body of %d bytes", n))
        return
    end
    local nonce_len, addr_len, port_len = l[1], l[2], l[3]
    t:add(f.add_id, tvb(off, 1))
    local pos = off + 1
    if nonce_len == 4 then
        t:add(f.add_nonce, tvb(pos, 4))
        pos = pos + 4
    else
        t:add_proto_expert_info(ef_note, "MP_ADDADDR without Nonce (pre-RFC layout)")
    end
    if addr_len == 4 then
        if p.prefs.ref_addaddr_v4_reversed then
            t:add_le(f.add_v4, tvb(pos, 4))
        else
            t:add(f.add_v4, tvb(pos, 4))
        end
    else
        t:add(f.add_v6, tvb(pos, 16))
    end
    pos = pos + addr_len
    if port_len == 2 then
        t:add(f.add_port, tvb(pos, 2))
    end
end

dissect_mp = function(tvb, tree, off, len, depth)
    -- off: start of the option (type 46); len: its Length byte.
    local sub = tvb(off + 2, 1):uint()
    local name = mp_subtypes[sub] or string.format("MP_OPT %d", sub)
    local t = tree:add(p, tvb(off, len), "Multipath option: " .. name)
    t:add(f.option, tvb(off, 1))
    t:add(f.mp_len, tvb(off + 1, 1))
    t:add(f.mp, tvb(off + 2, 1))
    local b, n = off + 3, len - 3
    local function need(exact)
        if n ~= exact then
            t:add_proto_expert_info(ef_malformed,
                string.format("%s needs %d value bytes, has %d", name, exact, n))
            return false
        end
        return true
    end
    if sub == 0 then
        if depth > 0 then
            t:add_proto_expert_info(ef_malformed, "nested MP_CONFIRM")
            return name
        end
        local pos, stop, count = b, b + n, 0
        while pos < stop do
            if stop - pos < 3 or tvb(pos, 1):uint() ~= 46 then
                t:add_proto_expert_info(ef_malformed, "MP_CONFIRM element is not a Multipath option")
                break
            end
            local el = tvb(pos + 1, 1):uint()
            if el < 3 or pos + el > stop then
                t:add_proto_expert_info(ef_malformed, "MP_CONFIRM element length")
                break
            end
            dissect_mp(tvb, t, pos, el, depth + 1)
            count = count + 1
            pos = pos + el
        end
        t:add(f.confirm_count, count):set_generated()
    elseif sub == 1 then
        if need(9) then
            t:add(f.join_addr_id, tvb(b, 1))
            t:add(f.join_ci, tvb(b + 1, 4))
            t:add(f.join_nonce, tvb(b + 5, 4))
        end
    elseif sub == 2 then
        if n > 0 then t:add(f.fast_close_key, tvb(b, n)) end
    elseif sub == 3 then
        dissect_mp_key(tvb, t, b, n)
    elseif sub == 4 then
        if need(6) then add_u64(t, f.mp_seq, tvb(b, 6)) end
    elseif sub == 5 then
        if need(20) then t:add(f.hmac, tvb(b, 20)) end
    elseif sub == 6 then
        if need(9) then
            t:add(f.rtt_type, tvb(b, 1))
            t:add(f.rtt, tvb(b + 1, 4))
            t:add(f.rtt_age, tvb(b + 5, 4))
        end
    elseif sub == 7 then
        dissect_addaddr(tvb, t, b, n)
    elseif sub == 8 then
        if n == 5 then
            t:add(f.rem_id, tvb(b, 1))
            t:add(f.rem_nonce, tvb(b + 1, 4))
        elseif n == 1 then
            t:add(f.rem_id, tvb(b, 1))
            t:add_proto_expert_info(ef_note, "MP_REMOVEADDR without Nonce (pre-RFC layout)")
        else
            need(5)
        end
    elseif sub == 9 then
        if need(1) then
            t:add(f.prio_resvd, tvb(b, 1))
            local pi = t:add(f.prio, tvb(b, 1))
            local v = lo(tvb(b, 1):uint())
            pi:append_text(" (" .. (prio_names[v] or "Primary") .. ")")
        end
    elseif sub == 10 then
        if n > 0 then t:add(f.close_key, tvb(b, n)) end
    elseif sub == 11 then
        if n > 0 then t:add(f.exp_data, tvb(b, n)) end
    else
        t:add_proto_expert_info(ef_malformed, "MP_OPT reserved for future use")
    end
    return name
end

------------------------------------------------------------------------------
-- DCCP options
------------------------------------------------------------------------------
local function dissect_feature(tvb, t, kind, off, len)
    if len < 3 then
        t:add_proto_expert_info(ef_malformed, "feature option without a feature number")
        return
    end
    local feat = tvb(off + 2, 1):uint()
    t:add(f.feat_number, tvb(off + 2, 1))
    if len > 3 then
        t:add(f.feat_value, tvb(off + 3, len - 3))
    end
    if feat == 10 then
        -- Server-priority list of one-byte values: Version(4) | Unassigned(4).
        -- The client sends Change R, the server Confirm L (RFC 9897 §3.1).
        if kind == 32 or kind == 35 then
            t:add_proto_expert_info(ef_note,
                "Multipath Capable in " .. option_types[kind] .. ": RFC 9897 §3.1 uses Change R / Confirm L")
        end
        if len == 3 then
            t:append_text(" (empty: no agreement / not understood)")
        end
        for i = off + 3, off + len - 1 do
            local v = tvb(i, 1):uint()
            local vi = t:add(f.mp_capable, tvb(i, 1), hi(v))
            t:add(f.mp_capable_unassigned, tvb(i, 1), lo(v))
            if lo(v) ~= 0 then
                vi:add_proto_expert_info(ef_note, "unassigned bits not zero (RFC 9897 §3.1)")
            end
        end
    end
end

local function dissect_options(tvb, tree, off, stop, info)
    local pos = off
    while pos < stop do
        local kind = tvb(pos, 1):uint()
        if kind < 32 then
            if kind ~= 0 then
                tree:add(f.option, tvb(pos, 1))
            end
            pos = pos + 1
        else
            if pos + 1 >= stop then
                tree:add_proto_expert_info(ef_malformed, "option length byte missing")
                return
            end
            local len = tvb(pos + 1, 1):uint()
            if len < 2 or pos + len > stop then
                tree:add_proto_expert_info(ef_malformed, "option length out of range")
                return
            end
            if kind == 46 and len >= 3 then
                info[#info + 1] = dissect_mp(tvb, tree, pos, len, 0)
            else
                local t = tree:add(tvb(pos, len), option_types[kind] or string.format("Option %d", kind))
                t:add(f.option, tvb(pos, 1))
                t:add(f.option_len, tvb(pos + 1, 1))
                if kind >= 32 and kind <= 35 then
                    dissect_feature(tvb, t, kind, pos, len)
                elseif kind == 43 and (len == 4 or len == 6) then
                    t:add(f.elapsed, tvb(pos + 2, len - 2))
                elseif kind == 41 and len == 6 then
                    t:add(f.timestamp, tvb(pos + 2, 4))
                elseif len > 2 then
                    t:add(f.option_data, tvb(pos + 2, len - 2))
                end
            end
            pos = pos + len
        end
    end
end

------------------------------------------------------------------------------
-- DCCP packet after the generic header
------------------------------------------------------------------------------
-- tvb: the buffer; base: where the DCCP packet starts in it (may be
-- negative for U-DCCP, whose first 8 bytes are the UDP header that the UDP
-- dissector already consumed); gh_end: end of the generic header; ptype, x,
-- hlen: type, X bit and header length in bytes (Data Offset * 4).
local function dissect_rest(tvb, pinfo, tree, base, gh_end, ptype, x, hlen)
    local pos = gh_end
    local hend = base + hlen
    if hend > tvb:len() or hend < gh_end then
        tree:add_proto_expert_info(ef_malformed, "Data Offset beyond the packet")
        return
    end
    if ptype ~= 0 and ptype ~= 2 then
        if x then
            add_u64(tree, f.ack, tvb(pos + 2, 6))
            pos = pos + 8
        else
            tree:add(f.ack, tvb(pos + 1, 3), UInt64(tvb(pos + 1, 3):uint()))
            pos = pos + 4
        end
    end
    if ptype == 0 or ptype == 1 then
        tree:add(f.service_code, tvb(pos, 4))
        pos = pos + 4
    elseif ptype == 7 then
        tree:add(f.reset_code, tvb(pos, 1))
        tree:add(f.reset_data, tvb(pos + 1, 3))
        pos = pos + 4
    end
    local info = {}
    if pos < hend then
        dissect_options(tvb, tree, pos, hend, info)
    end
    if hend < tvb:len() then
        tree:add(f.payload, tvb(hend))
    end
    pinfo.cols.info:append(" " .. (packet_types[ptype] or "?"))
    if #info > 0 then
        pinfo.cols.info:append(" [" .. table.concat(info, ", ") .. "]")
    end
end

-- A complete DCCP packet (native or inside UDP per RFC 6773).
local function dissect_dccp(tvb, pinfo, root, encap)
    if tvb:len() < 12 then return 0 end
    pinfo.cols.protocol = "MPDCCP"
    pinfo.cols.info = string.format("%d → %d", tvb(0, 2):uint(), tvb(2, 2):uint())
    local tree = root:add(p, tvb(), "Multipath DCCP (RFC 9897)")
    tree:add(f.encap, encap):set_generated()
    tree:add(f.srcport, tvb(0, 2))
    tree:add(f.dstport, tvb(2, 2))
    tree:add(f.data_offset, tvb(4, 1))
    local b5 = tvb(5, 1):uint()
    tree:add(f.ccval, tvb(5, 1), hi(b5))
    tree:add(f.cscov, tvb(5, 1), lo(b5))
    tree:add(f.checksum, tvb(6, 2))
    local b8 = tvb(8, 1):uint()
    local ptype = math.floor(b8 / 2) % 16
    local x = (b8 % 2) == 1
    tree:add(f.type, tvb(8, 1), ptype)
    tree:add(f.x, tvb(8, 1), x)
    local gh_end
    if x then
        if tvb:len() < 16 then return 0 end
        add_u64(tree, f.seq, tvb(10, 6))
        gh_end = 16
    else
        tree:add(f.seq, tvb(9, 3), UInt64(tvb(9, 3):uint()))
        gh_end = 12
    end
    dissect_rest(tvb, pinfo, tree, 0, gh_end, ptype, x, tvb(4, 1):uint() * 4)
    return tvb:len()
end

function p.dissector(tvb, pinfo, root)
    return dissect_dccp(tvb, pinfo, root, "native DCCP")
end

-- RFC 6773: the UDP payload is a whole DCCP packet.
local p_udp = Proto("mpdccp_udp", "DCCP-in-UDP (RFC 6773)")
function p_udp.dissector(tvb, pinfo, root)
    return dissect_dccp(tvb, pinfo, root, "DCCP-in-UDP (RFC 6773)")
end

-- U-DCCP: the UDP header is the DCCP header's first 8 bytes rearranged
-- (ports, UDP Length, UDP checksum); the UDP dissector hands us octet 9 on:
-- Type|CCVal (Figure 5: Type high), Data Offset, 48-bit Sequence Number,
-- then the DCCP packet from its type-specific fields on, unchanged.
local p_udccp = Proto("mpdccp_udccp", "U-DCCP (draft-amend-tsvwg-dccp-udp-header-conversion-01)")
function p_udccp.dissector(tvb, pinfo, root)
    if tvb:len() < 8 then return 0 end
    pinfo.cols.protocol = "MPDCCP"
    pinfo.cols.info = string.format("%d → %d U-DCCP", pinfo.src_port, pinfo.dst_port)
    local tree = root:add(p, tvb(), "Multipath DCCP (RFC 9897) over U-DCCP")
    tree:add(f.encap, "U-DCCP"):set_generated()
    tree:add(f.srcport, pinfo.src_port):set_generated()
    tree:add(f.dstport, pinfo.dst_port):set_generated()
    local o9 = tvb(0, 1):uint()
    local ptype, ccval = hi(o9), lo(o9)
    if p.prefs.udccp_ref_nibbles then
        ptype, ccval = lo(o9), hi(o9)
    end
    tree:add(f.type, tvb(0, 1), ptype)
    tree:add(f.ccval, tvb(0, 1), ccval)
    tree:add(f.data_offset, tvb(1, 1))
    tree:add(f.x, true):set_generated()
    add_u64(tree, f.seq, tvb(2, 6))
    if ptype > 9 then
        tree:add_proto_expert_info(ef_malformed, "packet type out of range")
        return tvb:len()
    end
    -- The DCCP packet starts 8 bytes before this buffer.
    dissect_rest(tvb, pinfo, tree, -8, 8, ptype, true, tvb(1, 1):uint() * 4)
    return tvb:len()
end

------------------------------------------------------------------------------
-- Registration
------------------------------------------------------------------------------
local registered_udp, registered_udccp = 0, 0
local function register_ports()
    local udp = DissectorTable.get("udp.port")
    if registered_udp ~= 0 then udp:remove(registered_udp, p_udp) end
    if registered_udccp ~= 0 then udp:remove(registered_udccp, p_udccp) end
    registered_udp, registered_udccp = p.prefs.udp_port, p.prefs.udccp_port
    if registered_udp ~= 0 then udp:add(registered_udp, p_udp) end
    if registered_udccp ~= 0 then udp:add(registered_udccp, p_udccp) end
end

local native_on = false
local function register_native()
    local ip = DissectorTable.get("ip.proto")
    if p.prefs.native and not native_on then
        ip:add(33, p)
        native_on = true
    elseif not p.prefs.native and native_on then
        ip:add(33, Dissector.get("dccp"))
        native_on = false
    end
end

function p.prefs_changed()
    register_ports()
    register_native()
end

register_ports()
register_native()
