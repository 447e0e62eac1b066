//! The match fields Open vSwitch knows, as it names and orders them in table features: every
//! OXM/NXM header it recognizes there, mapped to its field name.
//!
//! Collected from `ovs-ofctl ofp-print` (Open vSwitch 3.1): each header was printed alone to
//! learn its name, and the order is the one OVS lists a switch's own fields in.

/// OVS's field names in its internal field order, the order it lists fields in.
pub(super) const FIELD_NAMES: [&str; 178] = [
    "dp_hash",
    "recirc_id",
    "packet_type",
    "conj_id",
    "tun_id",
    "tun_src",
    "tun_dst",
    "tun_ipv6_src",
    "tun_ipv6_dst",
    "tun_flags",
    "tun_gbp_id",
    "tun_gbp_flags",
    "tun_erspan_idx",
    "tun_erspan_ver",
    "tun_erspan_dir",
    "tun_erspan_hwid",
    "tun_gtpu_flags",
    "tun_gtpu_msgtype",
    "tun_metadata0",
    "tun_metadata1",
    "tun_metadata2",
    "tun_metadata3",
    "tun_metadata4",
    "tun_metadata5",
    "tun_metadata6",
    "tun_metadata7",
    "tun_metadata8",
    "tun_metadata9",
    "tun_metadata10",
    "tun_metadata11",
    "tun_metadata12",
    "tun_metadata13",
    "tun_metadata14",
    "tun_metadata15",
    "tun_metadata16",
    "tun_metadata17",
    "tun_metadata18",
    "tun_metadata19",
    "tun_metadata20",
    "tun_metadata21",
    "tun_metadata22",
    "tun_metadata23",
    "tun_metadata24",
    "tun_metadata25",
    "tun_metadata26",
    "tun_metadata27",
    "tun_metadata28",
    "tun_metadata29",
    "tun_metadata30",
    "tun_metadata31",
    "tun_metadata32",
    "tun_metadata33",
    "tun_metadata34",
    "tun_metadata35",
    "tun_metadata36",
    "tun_metadata37",
    "tun_metadata38",
    "tun_metadata39",
    "tun_metadata40",
    "tun_metadata41",
    "tun_metadata42",
    "tun_metadata43",
    "tun_metadata44",
    "tun_metadata45",
    "tun_metadata46",
    "tun_metadata47",
    "tun_metadata48",
    "tun_metadata49",
    "tun_metadata50",
    "tun_metadata51",
    "tun_metadata52",
    "tun_metadata53",
    "tun_metadata54",
    "tun_metadata55",
    "tun_metadata56",
    "tun_metadata57",
    "tun_metadata58",
    "tun_metadata59",
    "tun_metadata60",
    "tun_metadata61",
    "tun_metadata62",
    "tun_metadata63",
    "metadata",
    "in_port",
    "in_port_oxm",
    "actset_output",
    "pkt_mark",
    "ct_state",
    "ct_zone",
    "ct_mark",
    "ct_label",
    "ct_nw_proto",
    "ct_nw_src",
    "ct_nw_dst",
    "ct_ipv6_src",
    "ct_ipv6_dst",
    "ct_tp_src",
    "ct_tp_dst",
    "reg0",
    "reg1",
    "reg2",
    "reg3",
    "reg4",
    "reg5",
    "reg6",
    "reg7",
    "reg8",
    "reg9",
    "reg10",
    "reg11",
    "reg12",
    "reg13",
    "reg14",
    "reg15",
    "xreg0",
    "xreg1",
    "xreg2",
    "xreg3",
    "xreg4",
    "xreg5",
    "xreg6",
    "xreg7",
    "xxreg0",
    "xxreg1",
    "xxreg2",
    "xxreg3",
    "eth_src",
    "eth_dst",
    "eth_type",
    "vlan_tci",
    "vlan_vid",
    "vlan_pcp",
    "mpls_label",
    "mpls_tc",
    "mpls_bos",
    "mpls_ttl",
    "ip_src",
    "ip_dst",
    "ipv6_src",
    "ipv6_dst",
    "ipv6_label",
    "nw_proto",
    "nw_tos",
    "ip_dscp",
    "nw_ecn",
    "nw_ttl",
    "ip_frag",
    "arp_op",
    "arp_spa",
    "arp_tpa",
    "arp_sha",
    "arp_tha",
    "tcp_src",
    "tcp_dst",
    "tcp_flags",
    "udp_src",
    "udp_dst",
    "sctp_src",
    "sctp_dst",
    "icmp_type",
    "icmp_code",
    "icmpv6_type",
    "icmpv6_code",
    "nd_target",
    "nd_sll",
    "nd_tll",
    "nd_reserved",
    "nd_options_type",
    "nsh_flags",
    "nsh_mdtype",
    "nsh_np",
    "nsh_spi",
    "nsh_si",
    "nsh_c1",
    "nsh_c2",
    "nsh_c3",
    "nsh_c4",
    "nsh_ttl",
];

/// Every OXM/NXM header OVS recognizes in a table-features property: class, field,
/// experimenter id (0 unless the class is 0xffff), value length in bytes (0: any length from
/// 1 to 124, the `tun_metadata` fields), and the field's index in [`FIELD_NAMES`].
pub(super) const HEADERS: [(u16, u8, u32, u8, u8); 209] = [
    (0x0000, 0, 0x0, 2, 83),          // in_port
    (0x0000, 1, 0x0, 6, 127),         // eth_dst
    (0x0000, 2, 0x0, 6, 126),         // eth_src
    (0x0000, 3, 0x0, 2, 128),         // eth_type
    (0x0000, 4, 0x0, 2, 129),         // vlan_tci
    (0x0000, 5, 0x0, 1, 142),         // nw_tos
    (0x0000, 6, 0x0, 1, 141),         // nw_proto
    (0x0000, 7, 0x0, 4, 136),         // ip_src
    (0x0000, 8, 0x0, 4, 137),         // ip_dst
    (0x0000, 9, 0x0, 2, 152),         // tcp_src
    (0x0000, 10, 0x0, 2, 153),        // tcp_dst
    (0x0000, 11, 0x0, 2, 155),        // udp_src
    (0x0000, 12, 0x0, 2, 156),        // udp_dst
    (0x0000, 13, 0x0, 1, 159),        // icmp_type
    (0x0000, 14, 0x0, 1, 160),        // icmp_code
    (0x0000, 15, 0x0, 2, 147),        // arp_op
    (0x0000, 16, 0x0, 4, 148),        // arp_spa
    (0x0000, 17, 0x0, 4, 149),        // arp_tpa
    (0x0001, 0, 0x0, 4, 98),          // reg0
    (0x0001, 1, 0x0, 4, 99),          // reg1
    (0x0001, 2, 0x0, 4, 100),         // reg2
    (0x0001, 3, 0x0, 4, 101),         // reg3
    (0x0001, 4, 0x0, 4, 102),         // reg4
    (0x0001, 5, 0x0, 4, 103),         // reg5
    (0x0001, 6, 0x0, 4, 104),         // reg6
    (0x0001, 7, 0x0, 4, 105),         // reg7
    (0x0001, 8, 0x0, 4, 106),         // reg8
    (0x0001, 9, 0x0, 4, 107),         // reg9
    (0x0001, 10, 0x0, 4, 108),        // reg10
    (0x0001, 11, 0x0, 4, 109),        // reg11
    (0x0001, 12, 0x0, 4, 110),        // reg12
    (0x0001, 13, 0x0, 4, 111),        // reg13
    (0x0001, 14, 0x0, 4, 112),        // reg14
    (0x0001, 15, 0x0, 4, 113),        // reg15
    (0x0001, 16, 0x0, 8, 4),          // tun_id
    (0x0001, 17, 0x0, 6, 150),        // arp_sha
    (0x0001, 18, 0x0, 6, 151),        // arp_tha
    (0x0001, 19, 0x0, 16, 138),       // ipv6_src
    (0x0001, 20, 0x0, 16, 139),       // ipv6_dst
    (0x0001, 21, 0x0, 1, 161),        // icmpv6_type
    (0x0001, 22, 0x0, 1, 162),        // icmpv6_code
    (0x0001, 23, 0x0, 16, 163),       // nd_target
    (0x0001, 24, 0x0, 6, 164),        // nd_sll
    (0x0001, 25, 0x0, 6, 165),        // nd_tll
    (0x0001, 26, 0x0, 1, 146),        // ip_frag
    (0x0001, 27, 0x0, 4, 140),        // ipv6_label
    (0x0001, 28, 0x0, 1, 144),        // nw_ecn
    (0x0001, 29, 0x0, 1, 145),        // nw_ttl
    (0x0001, 30, 0x0, 1, 135),        // mpls_ttl
    (0x0001, 31, 0x0, 4, 5),          // tun_src
    (0x0001, 32, 0x0, 4, 6),          // tun_dst
    (0x0001, 33, 0x0, 4, 86),         // pkt_mark
    (0x0001, 34, 0x0, 2, 154),        // tcp_flags
    (0x0001, 35, 0x0, 4, 0),          // dp_hash
    (0x0001, 36, 0x0, 4, 1),          // recirc_id
    (0x0001, 37, 0x0, 4, 3),          // conj_id
    (0x0001, 38, 0x0, 2, 10),         // tun_gbp_id
    (0x0001, 39, 0x0, 1, 11),         // tun_gbp_flags
    (0x0001, 40, 0x0, 0, 18),         // tun_metadata0
    (0x0001, 41, 0x0, 0, 19),         // tun_metadata1
    (0x0001, 42, 0x0, 0, 20),         // tun_metadata2
    (0x0001, 43, 0x0, 0, 21),         // tun_metadata3
    (0x0001, 44, 0x0, 0, 22),         // tun_metadata4
    (0x0001, 45, 0x0, 0, 23),         // tun_metadata5
    (0x0001, 46, 0x0, 0, 24),         // tun_metadata6
    (0x0001, 47, 0x0, 0, 25),         // tun_metadata7
    (0x0001, 48, 0x0, 0, 26),         // tun_metadata8
    (0x0001, 49, 0x0, 0, 27),         // tun_metadata9
    (0x0001, 50, 0x0, 0, 28),         // tun_metadata10
    (0x0001, 51, 0x0, 0, 29),         // tun_metadata11
    (0x0001, 52, 0x0, 0, 30),         // tun_metadata12
    (0x0001, 53, 0x0, 0, 31),         // tun_metadata13
    (0x0001, 54, 0x0, 0, 32),         // tun_metadata14
    (0x0001, 55, 0x0, 0, 33),         // tun_metadata15
    (0x0001, 56, 0x0, 0, 34),         // tun_metadata16
    (0x0001, 57, 0x0, 0, 35),         // tun_metadata17
    (0x0001, 58, 0x0, 0, 36),         // tun_metadata18
    (0x0001, 59, 0x0, 0, 37),         // tun_metadata19
    (0x0001, 60, 0x0, 0, 38),         // tun_metadata20
    (0x0001, 61, 0x0, 0, 39),         // tun_metadata21
    (0x0001, 62, 0x0, 0, 40),         // tun_metadata22
    (0x0001, 63, 0x0, 0, 41),         // tun_metadata23
    (0x0001, 64, 0x0, 0, 42),         // tun_metadata24
    (0x0001, 65, 0x0, 0, 43),         // tun_metadata25
    (0x0001, 66, 0x0, 0, 44),         // tun_metadata26
    (0x0001, 67, 0x0, 0, 45),         // tun_metadata27
    (0x0001, 68, 0x0, 0, 46),         // tun_metadata28
    (0x0001, 69, 0x0, 0, 47),         // tun_metadata29
    (0x0001, 70, 0x0, 0, 48),         // tun_metadata30
    (0x0001, 71, 0x0, 0, 49),         // tun_metadata31
    (0x0001, 72, 0x0, 0, 50),         // tun_metadata32
    (0x0001, 73, 0x0, 0, 51),         // tun_metadata33
    (0x0001, 74, 0x0, 0, 52),         // tun_metadata34
    (0x0001, 75, 0x0, 0, 53),         // tun_metadata35
    (0x0001, 76, 0x0, 0, 54),         // tun_metadata36
    (0x0001, 77, 0x0, 0, 55),         // tun_metadata37
    (0x0001, 78, 0x0, 0, 56),         // tun_metadata38
    (0x0001, 79, 0x0, 0, 57),         // tun_metadata39
    (0x0001, 80, 0x0, 0, 58),         // tun_metadata40
    (0x0001, 81, 0x0, 0, 59),         // tun_metadata41
    (0x0001, 82, 0x0, 0, 60),         // tun_metadata42
    (0x0001, 83, 0x0, 0, 61),         // tun_metadata43
    (0x0001, 84, 0x0, 0, 62),         // tun_metadata44
    (0x0001, 85, 0x0, 0, 63),         // tun_metadata45
    (0x0001, 86, 0x0, 0, 64),         // tun_metadata46
    (0x0001, 87, 0x0, 0, 65),         // tun_metadata47
    (0x0001, 88, 0x0, 0, 66),         // tun_metadata48
    (0x0001, 89, 0x0, 0, 67),         // tun_metadata49
    (0x0001, 90, 0x0, 0, 68),         // tun_metadata50
    (0x0001, 91, 0x0, 0, 69),         // tun_metadata51
    (0x0001, 92, 0x0, 0, 70),         // tun_metadata52
    (0x0001, 93, 0x0, 0, 71),         // tun_metadata53
    (0x0001, 94, 0x0, 0, 72),         // tun_metadata54
    (0x0001, 95, 0x0, 0, 73),         // tun_metadata55
    (0x0001, 96, 0x0, 0, 74),         // tun_metadata56
    (0x0001, 97, 0x0, 0, 75),         // tun_metadata57
    (0x0001, 98, 0x0, 0, 76),         // tun_metadata58
    (0x0001, 99, 0x0, 0, 77),         // tun_metadata59
    (0x0001, 100, 0x0, 0, 78),        // tun_metadata60
    (0x0001, 101, 0x0, 0, 79),        // tun_metadata61
    (0x0001, 102, 0x0, 0, 80),        // tun_metadata62
    (0x0001, 103, 0x0, 0, 81),        // tun_metadata63
    (0x0001, 104, 0x0, 2, 9),         // tun_flags
    (0x0001, 105, 0x0, 4, 87),        // ct_state
    (0x0001, 106, 0x0, 2, 88),        // ct_zone
    (0x0001, 107, 0x0, 4, 89),        // ct_mark
    (0x0001, 108, 0x0, 16, 90),       // ct_label
    (0x0001, 109, 0x0, 16, 7),        // tun_ipv6_src
    (0x0001, 110, 0x0, 16, 8),        // tun_ipv6_dst
    (0x0001, 111, 0x0, 16, 122),      // xxreg0
    (0x0001, 112, 0x0, 16, 123),      // xxreg1
    (0x0001, 113, 0x0, 16, 124),      // xxreg2
    (0x0001, 114, 0x0, 16, 125),      // xxreg3
    (0x0001, 119, 0x0, 1, 91),        // ct_nw_proto
    (0x0001, 120, 0x0, 4, 92),        // ct_nw_src
    (0x0001, 121, 0x0, 4, 93),        // ct_nw_dst
    (0x0001, 122, 0x0, 16, 94),       // ct_ipv6_src
    (0x0001, 123, 0x0, 16, 95),       // ct_ipv6_dst
    (0x0001, 124, 0x0, 2, 96),        // ct_tp_src
    (0x0001, 125, 0x0, 2, 97),        // ct_tp_dst
    (0x1000, 1, 0x0, 4, 166),         // nd_reserved
    (0x1000, 2, 0x0, 1, 167),         // nd_options_type
    (0x8000, 0, 0x0, 4, 84),          // in_port_oxm
    (0x8000, 2, 0x0, 8, 82),          // metadata
    (0x8000, 3, 0x0, 6, 127),         // eth_dst
    (0x8000, 4, 0x0, 6, 126),         // eth_src
    (0x8000, 5, 0x0, 2, 128),         // eth_type
    (0x8000, 6, 0x0, 2, 130),         // vlan_vid
    (0x8000, 7, 0x0, 1, 131),         // vlan_pcp
    (0x8000, 8, 0x0, 1, 143),         // ip_dscp
    (0x8000, 9, 0x0, 1, 144),         // nw_ecn
    (0x8000, 10, 0x0, 1, 141),        // nw_proto
    (0x8000, 11, 0x0, 4, 136),        // ip_src
    (0x8000, 12, 0x0, 4, 137),        // ip_dst
    (0x8000, 13, 0x0, 2, 152),        // tcp_src
    (0x8000, 14, 0x0, 2, 153),        // tcp_dst
    (0x8000, 15, 0x0, 2, 155),        // udp_src
    (0x8000, 16, 0x0, 2, 156),        // udp_dst
    (0x8000, 17, 0x0, 2, 157),        // sctp_src
    (0x8000, 18, 0x0, 2, 158),        // sctp_dst
    (0x8000, 19, 0x0, 1, 159),        // icmp_type
    (0x8000, 20, 0x0, 1, 160),        // icmp_code
    (0x8000, 21, 0x0, 2, 147),        // arp_op
    (0x8000, 22, 0x0, 4, 148),        // arp_spa
    (0x8000, 23, 0x0, 4, 149),        // arp_tpa
    (0x8000, 24, 0x0, 6, 150),        // arp_sha
    (0x8000, 25, 0x0, 6, 151),        // arp_tha
    (0x8000, 26, 0x0, 16, 138),       // ipv6_src
    (0x8000, 27, 0x0, 16, 139),       // ipv6_dst
    (0x8000, 28, 0x0, 4, 140),        // ipv6_label
    (0x8000, 29, 0x0, 1, 161),        // icmpv6_type
    (0x8000, 30, 0x0, 1, 162),        // icmpv6_code
    (0x8000, 31, 0x0, 16, 163),       // nd_target
    (0x8000, 32, 0x0, 6, 164),        // nd_sll
    (0x8000, 33, 0x0, 6, 165),        // nd_tll
    (0x8000, 34, 0x0, 4, 132),        // mpls_label
    (0x8000, 35, 0x0, 1, 133),        // mpls_tc
    (0x8000, 36, 0x0, 1, 134),        // mpls_bos
    (0x8000, 38, 0x0, 8, 4),          // tun_id
    (0x8000, 42, 0x0, 2, 154),        // tcp_flags
    (0x8000, 43, 0x0, 4, 85),         // actset_output
    (0x8000, 44, 0x0, 4, 2),          // packet_type
    (0x8001, 0, 0x0, 8, 114),         // xreg0
    (0x8001, 1, 0x0, 8, 115),         // xreg1
    (0x8001, 2, 0x0, 8, 116),         // xreg2
    (0x8001, 3, 0x0, 8, 117),         // xreg3
    (0x8001, 4, 0x0, 8, 118),         // xreg4
    (0x8001, 5, 0x0, 8, 119),         // xreg5
    (0x8001, 6, 0x0, 8, 120),         // xreg6
    (0x8001, 7, 0x0, 8, 121),         // xreg7
    (0xffff, 0, 0x2320, 4, 0),        // dp_hash
    (0xffff, 1, 0x5ad650, 1, 168),    // nsh_flags
    (0xffff, 2, 0x5ad650, 1, 169),    // nsh_mdtype
    (0xffff, 3, 0x5ad650, 1, 170),    // nsh_np
    (0xffff, 4, 0x5ad650, 4, 171),    // nsh_spi
    (0xffff, 5, 0x5ad650, 1, 172),    // nsh_si
    (0xffff, 6, 0x5ad650, 4, 173),    // nsh_c1
    (0xffff, 7, 0x5ad650, 4, 174),    // nsh_c2
    (0xffff, 8, 0x5ad650, 4, 175),    // nsh_c3
    (0xffff, 9, 0x5ad650, 4, 176),    // nsh_c4
    (0xffff, 10, 0x5ad650, 1, 177),   // nsh_ttl
    (0xffff, 11, 0x2320, 4, 12),      // tun_erspan_idx
    (0xffff, 12, 0x2320, 1, 13),      // tun_erspan_ver
    (0xffff, 13, 0x2320, 1, 14),      // tun_erspan_dir
    (0xffff, 14, 0x2320, 1, 15),      // tun_erspan_hwid
    (0xffff, 15, 0x2320, 1, 16),      // tun_gtpu_flags
    (0xffff, 16, 0x2320, 1, 17),      // tun_gtpu_msgtype
    (0xffff, 42, 0x4f4e4600, 2, 154), // tcp_flags
    (0xffff, 43, 0x4f4e4600, 4, 85),  // actset_output
];

/// The index in [`FIELD_NAMES`] of the field an OXM header names, if OVS knows it: `class`,
/// `field` and `experimenter` as on the wire, `value_len` the length of the value alone.
pub(super) fn field_index(
    class: u16,
    field: u8,
    experimenter: u32,
    value_len: u8,
) -> Option<usize> {
    HEADERS
        .iter()
        .find(|(c, f, e, len, _)| {
            *c == class
                && *f == field
                && *e == experimenter
                && (*len == value_len || (*len == 0 && (1..=124).contains(&value_len)))
        })
        .map(|(.., index)| usize::from(*index))
}
