// SPDX-License-Identifier: GPL-2.0
/*
 * netscale.multinic host datapath: two tc (clsact ingress) programs.
 *
 *   mn_nic_ingress  on every NIC:  a packet for a container address or task IP that belongs to this
 *                   NIC's veths gets its MACs rewritten and is handed to the workload with
 *                   bpf_redirect_peer (host stack bypassed); anything else -> TC_ACT_OK.
 *   mn_veth_ingress on the host end of every workload veth: a packet from the workload to a
 *                   non-local destination leaves straight out of "its" NIC k with bpf_redirect_neigh
 *                   (next hop = the ToR gateway of NIC k).  If NIC k no longer resolves its gateway
 *                   (admin down, carrier lost with ignore_routes_with_linkdown=1) a surviving NIC is
 *                   used instead, chosen among all usable NICs by flow hash (even failover).
 *                   With the egress policy least_loaded (mn_ecfg) a new flow is placed on the
 *                   usable NIC with the fewest active flows instead of NIC k, pinned in the LRU
 *                   flow table mn_flows and re-placed when its NIC becomes unusable.
 *                   Host-local, ND/ARP, link-local, multicast -> TC_ACT_OK.
 *                   "Host-local" is decided by one LPM lookup in mn_local4/mn_local6, a mirror of
 *                   the host's local table and of the main table's non-default routes that the
 *                   loader fills and the NIC watcher keeps in sync; when the loader cannot
 *                   mirror the host's routing (unknown policy rules, too many routes) it clears
 *                   CFG_USE_LOCAL_MAP and the program does a full bpf_fib_lookup per packet.
 *                   Anti-spoofing first: an IPv4/IPv6 packet whose source is not one of the slot's
 *                   addresses (mn_src: task IPs, container addresses) is dropped and counted per slot
 *                   (mn_spoof); link-local sources go to the host stack only (never redirected).
 *
 * Maps are BTF-defined and pinned by the loader (bpftool ... pinmaps) under
 * /sys/fs/bpf/netscale-multinic/<version>/maps; the loader fills them from the plan.
 * Build: clang -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu -c multinic_datapath.c
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define MN_AF_INET 2
#define MN_AF_INET6 10
#define MN_MAX_NICS 8

#define ICMPV6_ND_FIRST 133 /* router solicitation */
#define ICMPV6_ND_LAST 137  /* redirect */

/* statistics slots (per-CPU array, read by the loader / tests) */
enum {
	ST_IN_REDIRECT = 0, /* NIC ingress -> redirect_peer into a workload */
	ST_IN_PASS,         /* NIC ingress -> host stack */
	ST_OUT_REDIRECT,    /* veth ingress -> redirect_neigh out of its own NIC */
	ST_OUT_FAILOVER,    /* veth ingress -> redirect_neigh out of a surviving NIC */
	ST_OUT_LOCAL,       /* veth ingress -> host-local / non-NIC destination, host stack */
	ST_OUT_PASS,        /* veth ingress -> ND/ARP/link-local/multicast, host stack */
	ST_OUT_NOROUTE,     /* veth ingress -> no NIC resolves its gateway, host stack */
	ST_OUT_SPOOF,       /* veth ingress -> source not allowed for the slot, dropped */
	ST_OUT_PLACED,      /* least_loaded: a new flow placed (and pinned in mn_flows) */
	ST_OUT_PINNED,      /* least_loaded: a packet sent out of its flow's pinned NIC */
	ST_OUT_REPLACED,    /* least_loaded: a flow moved off its pinned NIC, which became unusable */
	ST_MAX,
};

struct ing_key {
	__u32 ifindex; /* NIC the packet arrived on */
	__u32 family;  /* MN_AF_INET / MN_AF_INET6 */
	__u8 addr[16]; /* IPv4 in the first 4 bytes, rest zero */
};

struct ing_val {
	__u32 veth_ifindex; /* host end of the slot's veth on this NIC */
	__u8 dmac[6];       /* workload end MAC */
	__u8 smac[6];       /* host end MAC */
};

struct veth_val {
	__u32 nic;  /* index into mn_nics */
	__u32 slot; /* the slot's number (mn_src / mn_spoof key) */
};

/* A source address a slot may send from (value: 1). */
struct src_key {
	__u32 slot;
	__u32 family;  /* MN_AF_INET / MN_AF_INET6 */
	__u8 addr[16]; /* IPv4 in the first 4 bytes, rest zero */
};

struct nic_val {
	__u32 ifindex; /* 0 = unused slot */
	__u32 flags;   /* bit 0: gw4 valid, bit 1: gw6 valid, bit 2: NIC_OUT */
	__u32 gw4;     /* network order */
	__u8 gw6[16];
};

/* mn_nics flags bit set by the NIC watcher: gray failure (gateway silent, one-way loss, ARP/ND
 * replies lost, dampened flaps) - the NIC is out of the egress set although its carrier is up */
#define NIC_OUT 4

#define CFG_USE_LOCAL_MAP 1 /* mn_local4/6 are complete: no full fib lookup per packet */

struct cfg_val {
	__u32 nic_count;
	__u32 flags; /* CFG_* */
};

/* Host-local verdicts (mn_local4/6 values).  No entry = not host-local. */
#define LOCAL_STACK 1 /* local/broadcast address, route via a non-NIC device, unreachable...: stack */
#define LOCAL_FWD 2   /* a NIC route nested inside a LOCAL_STACK prefix (or a throw): not host-local */

struct lpm4_key {
	__u32 prefixlen;
	__u32 addr; /* network order */
};

struct lpm6_key {
	__u32 prefixlen;
	__u8 addr[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct ing_key);
	__type(value, struct ing_val);
} mn_ingress SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct veth_val);
} mn_veth SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MN_MAX_NICS);
	__type(key, __u32);
	__type(value, struct nic_val);
} mn_nics SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cfg_val);
} mn_cfg SEC(".maps");

/* Bounded: the loader switches to the full fib lookup instead of storing more than this. */
#define MN_LOCAL_MAX 4096

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, MN_LOCAL_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm4_key);
	__type(value, __u32);
} mn_local4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, MN_LOCAL_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm6_key);
	__type(value, __u32);
} mn_local6 SEC(".maps");

/* Allowed sources: per slot its task IPs and container addresses.  Bounded by mn_veth: at most
 * slots x (2 + 2 x NICs) <= 4096 entries while slots x NICs <= 1024. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct src_key);
	__type(value, __u32);
} mn_src SEC(".maps");

/* Spoofed packets dropped, per slot number (entries created by the program on the first drop). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} mn_spoof SEC(".maps");

/* Egress placement (issue 14): the loader writes mn_ecfg[0]; the program keeps mn_flows and mn_eload. */
#define EGRESS_HASH 0         /* the workload's veth choice (its own L4 ECMP hash) decides the NIC */
#define EGRESS_LEAST_LOADED 1 /* a new flow goes to the usable NIC with the fewest active flows */

struct ecfg_val {
	__u32 policy; /* EGRESS_* */
	__u32 idle_s; /* a flow-table entry idle this long is dropped by the sweep (and not counted) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ecfg_val);
} mn_ecfg SEC(".maps");

/* NUMA preference (issue 14 item 3), per slot: the NICs on the slot's NUMA node.  The loader writes
 * an entry only for a slot whose node is known and holds some but not all of the NICs. */
#define MN_NUMA_ENTRIES 1024 /* slots (bounded by mn_veth: slots x NICs <= 1024) */

struct numa_val {
	__u32 local_mask;  /* bit i: NIC i is on the slot's NUMA node */
	__u32 spill_flows; /* least_loaded: the local NICs are "saturated" when the least loaded usable
			    * local NIC has at least this many active flows more than the least
			    * loaded usable remote NIC */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MN_NUMA_ENTRIES);
	__type(key, __u32);
	__type(value, struct numa_val);
} mn_numa SEC(".maps");

/* A flow: the 5-tuple as the workload sent it (IPv4 in the first 4 bytes of src/dst). */
struct flow_key {
	__u8 src[16];
	__u8 dst[16];
	__u16 sport; /* network order */
	__u16 dport;
	__u8 proto;  /* IPPROTO_TCP / IPPROTO_UDP */
	__u8 family; /* MN_AF_INET / MN_AF_INET6 */
	__u16 pad;
};

#define FLOW_CLOSING 1 /* FIN or RST sent by the workload: no longer counted as active */

struct flow_val {
	__u32 nic;     /* index into mn_nics */
	__u32 flags;   /* FLOW_* */
	__u64 last_ns; /* bpf_ktime_get_ns of its last packet (refreshed at most every 250 ms) */
};

/* Bounded: 16384 flows (LRU: the least recently used entry is evicted when full); memory is
 * preallocated, ~2 MiB (bytes_memlock of `bpftool map show`; docs/host-datapath.md). */
#define MN_FLOW_MAX 16384

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MN_FLOW_MAX);
	__type(key, struct flow_key);
	__type(value, struct flow_val);
} mn_flows SEC(".maps");

/* Per NIC [0, MN_MAX_NICS): active (pinned, not closing) flows, updated atomically on placement,
 * close and re-placement, and recounted from mn_flows by the sweep (which also drops idle
 * entries) at most once a second, when a flow is placed.  Entry MN_MAX_NICS: flows = placements
 * (the tie-break cursor), aux = time of the last sweep. */
struct load_val {
	__s64 flows;
	__u64 aux;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MN_MAX_NICS + 1);
	__type(key, __u32);
	__type(value, struct load_val);
} mn_eload SEC(".maps");

#define FLOW_TOUCH_NS 250000000ULL /* refresh last_ns at most this often per flow */
#define SWEEP_NS 1000000000ULL     /* sweep mn_flows at most once a second */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ST_MAX);
	__type(key, __u32);
	__type(value, __u64);
} mn_stats SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&mn_stats, &slot);

	if (v)
		*v += 1;
}

static __always_inline void count_spoof(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&mn_spoof, &slot);
	__u64 one = 1;

	count(ST_OUT_SPOOF);
	if (v) {
		*v += 1;
		return;
	}
	if (bpf_map_update_elem(&mn_spoof, &slot, &one, BPF_NOEXIST) == 0)
		return;
	v = bpf_map_lookup_elem(&mn_spoof, &slot); /* another CPU created it meanwhile */
	if (v)
		*v += 1;
}

/* ND (133..137) must reach the host stack, never the workload. */
static __always_inline int is_nd(void *data_end, struct ipv6hdr *ip6)
{
	__u8 *icmp = (void *)(ip6 + 1);

	if (ip6->nexthdr != IPPROTO_ICMPV6)
		return 0;
	if ((void *)(icmp + 1) > data_end)
		return 1; /* malformed: let the stack decide */
	return icmp[0] >= ICMPV6_ND_FIRST && icmp[0] <= ICMPV6_ND_LAST;
}

static __always_inline int v6_special(const struct in6_addr *a)
{
	/* multicast ff00::/8, link-local fe80::/10 */
	if (a->s6_addr[0] == 0xff)
		return 1;
	if (a->s6_addr[0] == 0xfe && (a->s6_addr[1] & 0xc0) == 0x80)
		return 1;
	return 0;
}

/* ::/96 (unspecified, loopback, IPv4-compatible) and ::ffff:0:0/96 (IPv4-mapped): the stack
 * decides (it drops a mapped source; a mapped destination is not a fabric address). */
static __always_inline int v6_embedded_v4(const struct in6_addr *a)
{
	if (a->s6_addr32[0] || a->s6_addr32[1])
		return 0;
	return a->s6_addr32[2] == 0 || a->s6_addr32[2] == bpf_htonl(0xffff);
}

static __always_inline int v4_special(__be32 a)
{
	__u32 h = bpf_ntohl(a);

	if ((h & 0xf0000000) == 0xe0000000) /* multicast */
		return 1;
	if ((h & 0xffff0000) == 0xa9fe0000) /* 169.254/16 link-local */
		return 1;
	if (h == 0xffffffff || h == 0)
		return 1;
	return 0;
}

long peer_reset(struct __sk_buff *skb, __u32 family);

SEC("tc")
int mn_nic_ingress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct ing_key key = {};
	struct ing_val *val;
	struct ecfg_val *ecfg;
	__u32 zero = 0;

	if ((void *)(eth + 1) > data_end)
		goto pass;
	key.ifindex = skb->ifindex;
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > data_end)
			goto pass;
		if (v6_special(&ip6->daddr) || is_nd(data_end, ip6))
			goto pass;
		key.family = MN_AF_INET6;
		__builtin_memcpy(key.addr, &ip6->daddr, 16);
	} else if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip4 = (void *)(eth + 1);

		if ((void *)(ip4 + 1) > data_end)
			goto pass;
		if (v4_special(ip4->daddr))
			goto pass;
		key.family = MN_AF_INET;
		__builtin_memcpy(key.addr, &ip4->daddr, 4);
	} else {
		goto pass; /* ARP and everything else: host stack */
	}
	val = bpf_map_lookup_elem(&mn_ingress, &key);
	if (!val)
		goto pass;
	ecfg = bpf_map_lookup_elem(&mn_ecfg, &zero);
	if (ecfg && ecfg->policy == EGRESS_LEAST_LOADED)
		peer_reset(skb, key.family); /* a reset by the peer ends the flow: the workload sends no FIN */
	__builtin_memcpy(eth->h_dest, val->dmac, 6);
	__builtin_memcpy(eth->h_source, val->smac, 6);
	count(ST_IN_REDIRECT);
	return bpf_redirect_peer(val->veth_ifindex, 0);
pass:
	count(ST_IN_PASS);
	return TC_ACT_OK;
}

static __always_inline int is_nic_ifindex(__u32 ifindex)
{
#pragma clang loop unroll(full)
	for (__u32 i = 0; i < MN_MAX_NICS; i++) {
		__u32 k = i;
		struct nic_val *n = bpf_map_lookup_elem(&mn_nics, &k);

		if (n && n->ifindex && n->ifindex == ifindex)
			return 1;
	}
	return 0;
}

/* Does NIC n still resolve its gateway (host main table, oif = the NIC)?  0 = yes.
 * A NIC the watcher took out (NIC_OUT) is unusable whatever the lookup says; NO_NEIGH (gateway
 * not resolved yet: bpf_redirect_neigh resolves it) counts as usable only for a NIC that is in. */
static __always_inline int nic_usable(struct __sk_buff *skb, struct nic_val *n, __u32 family,
				      struct bpf_redir_neigh *nh)
{
	struct bpf_fib_lookup p = {};
	long rc;

	if (!n->ifindex || (n->flags & NIC_OUT))
		return -1;
	p.ifindex = n->ifindex;
	/* tot_len stays 0: a set tot_len fails GSO super-packets on the MTU check */
	if (family == MN_AF_INET) {
		if (!(n->flags & 1))
			return -1;
		p.family = MN_AF_INET;
		p.ipv4_dst = n->gw4;
	} else {
		if (!(n->flags & 2))
			return -1;
		p.family = MN_AF_INET6;
		__builtin_memcpy(p.ipv6_dst, n->gw6, 16);
	}
	rc = bpf_fib_lookup(skb, &p, sizeof(p), BPF_FIB_LOOKUP_DIRECT | BPF_FIB_LOOKUP_OUTPUT);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH)
		return -1;
	if (p.ifindex != n->ifindex)
		return -1;
	nh->nh_family = family;
	if (family == MN_AF_INET)
		nh->ipv4_nh = p.ipv4_dst;
	else
		__builtin_memcpy(nh->ipv6_nh, p.ipv6_dst, 16);
	return 0;
}

/* Source check.  0: allowed (go on), 1: link-scope source, to the host stack only, -1: spoofed. */
static __always_inline int src_check6(struct veth_val *vv, struct ipv6hdr *ip6)
{
	struct src_key sk = {.slot = vv->slot, .family = MN_AF_INET6};
	const struct in6_addr *a = &ip6->saddr;

	if (a->s6_addr[0] == 0xfe && (a->s6_addr[1] & 0xc0) == 0x80)
		return 1; /* fe80::/10: the kernel never forwards it (ip6_forward) */
	if (!a->s6_addr32[0] && !a->s6_addr32[1] && !a->s6_addr32[2] && !a->s6_addr32[3])
		return ip6->daddr.s6_addr[0] == 0xff ? 1 : -1; /* ::, DAD / MLD to multicast only */
	__builtin_memcpy(sk.addr, a, 16);
	return bpf_map_lookup_elem(&mn_src, &sk) ? 0 : -1;
}

static __always_inline int src_check4(struct veth_val *vv, struct iphdr *ip4)
{
	struct src_key sk = {.slot = vv->slot, .family = MN_AF_INET};
	__u32 h = bpf_ntohl(ip4->saddr);

	if ((h & 0xffff0000) == 0xa9fe0000) /* 169.254/16: link-scope destinations only */
		return v4_special(ip4->daddr) ? 1 : -1;
	__builtin_memcpy(sk.addr, &ip4->saddr, 4);
	return bpf_map_lookup_elem(&mn_src, &sk) ? 0 : -1;
}

/* Bit i set: NIC i (i < cnt, i != skip) resolves its gateway now. */
__attribute__((noinline)) __u32 usable_mask(struct __sk_buff *skb, __u32 family, __u32 cnt, __u32 skip)
{
	struct bpf_redir_neigh scratch = {};
	__u32 mask = 0;

#pragma clang loop unroll(full)
	for (__u32 i = 0; i < MN_MAX_NICS; i++) {
		__u32 j = i;
		struct nic_val *n;

		if (i >= cnt)
			break;
		if (i == skip)
			continue;
		n = bpf_map_lookup_elem(&mn_nics, &j);
		if (n && nic_usable(skb, n, family, &scratch) == 0)
			mask |= 1U << i;
	}
	return mask;
}

/* The m-th set bit of mask (m < number of set bits). */
static __always_inline __u32 nth_bit(__u32 mask, __u32 m)
{
#pragma clang loop unroll(full)
	for (__u32 i = 0; i < MN_MAX_NICS; i++) {
		if (!(mask & (1U << i)))
			continue;
		if (m == 0)
			return i;
		m--;
	}
	return 0;
}

static __always_inline __u32 bits(__u32 mask)
{
	__u32 c = 0;

#pragma clang loop unroll(full)
	for (__u32 i = 0; i < MN_MAX_NICS; i++)
		c += (mask >> i) & 1;
	return c;
}

/* Redirect out of NIC j (re-resolving its gateway); -1 if it no longer resolves. */
__attribute__((noinline)) long send_via(struct __sk_buff *skb, __u32 j, __u32 family, __u32 stat)
{
	struct bpf_redir_neigh nh = {};
	struct nic_val *n = bpf_map_lookup_elem(&mn_nics, &j);

	if (!n || nic_usable(skb, n, family, &nh) != 0)
		return -1;
	count(stat);
	return bpf_redirect_neigh(n->ifindex, &nh, sizeof(nh), 0);
}

static __always_inline void load_add(__u32 j, __s64 d)
{
	struct load_val *v = bpf_map_lookup_elem(&mn_eload, &j);

	if (v)
		__sync_fetch_and_add(&v->flows, d);
}

/* The NIC of mask with the fewest active flows; ties go round-robin (placements so far). */
__attribute__((noinline)) __u32 least_loaded(__u32 mask, __u32 cnt)
{
	__u32 meta = MN_MAX_NICS, best = 0, start = 0;
	__s64 best_flows = 0x7fffffffffffffffLL;
	struct load_val *m = bpf_map_lookup_elem(&mn_eload, &meta);

	if (cnt < 1 || cnt > MN_MAX_NICS)
		return 0;

	if (m) {
		start = (__u32)m->flows % cnt;
		__sync_fetch_and_add(&m->flows, 1);
	}
#pragma clang loop unroll(full)
	for (__u32 i = 0; i < MN_MAX_NICS; i++) {
		__u32 j;
		struct load_val *v;
		__s64 f;

		if (i >= cnt)
			break;
		j = (start + i) % cnt;
		if (!(mask & (1U << j)))
			continue;
		v = bpf_map_lookup_elem(&mn_eload, &j);
		f = v ? v->flows : 0;
		if (f < best_flows) {
			best_flows = f;
			best = j;
		}
	}
	return best;
}

/* Fewest active flows among the NICs of mask (mask != 0). */
static __always_inline __s64 min_flows(__u32 mask)
{
	__s64 best = 0x7fffffffffffffffLL;

#pragma clang loop unroll(full)
	for (__u32 i = 0; i < MN_MAX_NICS; i++) {
		__u32 j = i;
		struct load_val *v;
		__s64 f;

		if (!(mask & (1U << i)))
			continue;
		v = bpf_map_lookup_elem(&mn_eload, &j);
		f = v ? v->flows : 0;
		if (f < best)
			best = f;
	}
	return best;
}

/* least_loaded with the slot's NUMA preference (local = 0: none): the least loaded usable local
 * NIC, unless no local NIC is usable or the local ones are saturated (the least loaded local NIC
 * has spill more active flows than the least loaded remote one): then the least loaded of all. */
__attribute__((noinline)) __u32 place_numa(__u32 mask, __u32 cnt, __u32 local, __u32 spill)
{
	__u32 lm = mask & local, rm = mask & ~local;

	if (!lm || !rm)
		return least_loaded(mask, cnt);
	if (min_flows(lm) >= min_flows(rm) + (__s64)spill)
		return least_loaded(mask, cnt); /* saturated: spill */
	return least_loaded(lm, cnt);
}

/* Bit i set: NIC i of want (i < cnt) resolves its gateway now. */
__attribute__((noinline)) __u32 usable_of(struct __sk_buff *skb, __u32 family, __u32 cnt, __u32 want)
{
	struct bpf_redir_neigh scratch = {};
	__u32 mask = 0;

#pragma clang loop unroll(full)
	for (__u32 i = 0; i < MN_MAX_NICS; i++) {
		__u32 j = i;
		struct nic_val *n;

		if (i >= cnt)
			break;
		if (!(want & (1U << i)))
			continue;
		n = bpf_map_lookup_elem(&mn_nics, &j);
		if (n && nic_usable(skb, n, family, &scratch) == 0)
			mask |= 1U << i;
	}
	return mask;
}

struct bpf_map;

struct sweep_ctx {
	__u64 now;
	__u64 idle_ns;
	__s64 cnt[MN_MAX_NICS];
};

static long sweep_one(struct bpf_map *map, struct flow_key *key, struct flow_val *val, struct sweep_ctx *c)
{
	if (val->last_ns < c->now && c->now - val->last_ns > c->idle_ns) {
		bpf_map_delete_elem(map, key);
		return 0;
	}
	if (val->flags & FLOW_CLOSING)
		return 0;
#pragma clang loop unroll(full)
	for (__u32 i = 0; i < MN_MAX_NICS; i++)
		if (val->nic == i)
			c->cnt[i]++;
	return 0;
}

/* At most once a second (when a flow is placed): drop idle entries and recount the active flows
 * per NIC, which also repairs counts lost to LRU evictions, peer-side closes and races. */
__attribute__((noinline)) int maybe_sweep(__u64 now, __u32 idle_s)
{
	__u32 meta = MN_MAX_NICS;
	struct load_val *m = bpf_map_lookup_elem(&mn_eload, &meta);
	struct sweep_ctx c = {.now = now, .idle_ns = (__u64)idle_s * 1000000000ULL};

	if (!m || (m->aux < now && now - m->aux < SWEEP_NS))
		return 0;
	m->aux = now;
	bpf_for_each_map_elem(&mn_flows, sweep_one, &c, 0);
#pragma clang loop unroll(full)
	for (__u32 i = 0; i < MN_MAX_NICS; i++) {
		__u32 j = i;
		struct load_val *v = bpf_map_lookup_elem(&mn_eload, &j);

		if (v)
			v->flows = c.cnt[i];
	}
	return 1;
}

#define TCPF_FIN 0x01
#define TCPF_SYN 0x02
#define TCPF_RST 0x04

/* The packet's flow (TCP/UDP, not a fragment).  0 = ok; *tflags: TCP flags; *payload: has data. */
static __always_inline int flow_of(struct __sk_buff *skb, __u32 family, struct flow_key *fk, __u8 *tflags,
				   int *payload)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	__u8 *l4;
	__u32 l4off;

	if (family == MN_AF_INET6) {
		struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);

		if ((void *)(ip6 + 1) > data_end)
			return -1;
		fk->proto = ip6->nexthdr; /* extension headers: not placed (hash path) */
		__builtin_memcpy(fk->src, &ip6->saddr, 16);
		__builtin_memcpy(fk->dst, &ip6->daddr, 16);
		l4off = sizeof(struct ethhdr) + sizeof(struct ipv6hdr);
	} else {
		struct iphdr *ip4 = data + sizeof(struct ethhdr);

		if ((void *)(ip4 + 1) > data_end)
			return -1;
		if (ip4->frag_off & bpf_htons(0x3fff)) /* MF or an offset: no ports in every fragment */
			return -1;
		fk->proto = ip4->protocol;
		__builtin_memcpy(fk->src, &ip4->saddr, 4);
		__builtin_memcpy(fk->dst, &ip4->daddr, 4);
		l4off = sizeof(struct ethhdr) + ip4->ihl * 4;
		if (ip4->ihl < 5)
			return -1;
	}
	fk->family = family;
	if (l4off > 256)
		return -1;
	l4 = data + l4off;
	if (fk->proto == IPPROTO_TCP) {
		struct tcphdr *th = (void *)l4;

		if ((void *)(th + 1) > data_end)
			return -1;
		fk->sport = th->source;
		fk->dport = th->dest;
		*tflags = ((__u8 *)th)[13];
		*payload = skb->len > l4off + th->doff * 4;
		return 0;
	}
	if (fk->proto == IPPROTO_UDP) {
		struct udphdr *uh = (void *)l4;

		if ((void *)(uh + 1) > data_end)
			return -1;
		fk->sport = uh->source;
		fk->dport = uh->dest;
		*tflags = 0;
		*payload = 1;
		return 0;
	}
	return -1;
}

/* Is the source a task IP (announced on every NIC, so any NIC may carry it)?  A container NIC
 * address is reachable through its own NIC only (mn_ingress has it for that NIC alone). */
static __always_inline int src_any_nic(__u32 family, struct flow_key *fk, __u32 k, __u32 cnt)
{
	struct ing_key ik = {.family = family};
	__u32 other = (k + 1) % cnt;
	struct nic_val *n = bpf_map_lookup_elem(&mn_nics, &other);

	if (!n || !n->ifindex)
		return 0;
	ik.ifindex = n->ifindex;
	__builtin_memcpy(ik.addr, fk->src, 16);
	return bpf_map_lookup_elem(&mn_ingress, &ik) != 0;
}

/* A TCP RST from the peer to a workload (NIC ingress): the flow it ends stops counting as active.
 * (A peer's FIN does not: the workload may still send after it, e.g. a response after a half-close.) */
__attribute__((noinline)) long peer_reset(struct __sk_buff *skb, __u32 family)
{
	struct flow_key fk = {}, rk = {};
	struct flow_val *fv;
	__u8 tflags = 0;
	int payload = 0;

	if (flow_of(skb, family, &fk, &tflags, &payload) != 0 || fk.proto != IPPROTO_TCP || !(tflags & TCPF_RST))
		return 0;
	__builtin_memcpy(rk.src, fk.dst, 16);
	__builtin_memcpy(rk.dst, fk.src, 16);
	rk.sport = fk.dport;
	rk.dport = fk.sport;
	rk.proto = fk.proto;
	rk.family = fk.family;
	fv = bpf_map_lookup_elem(&mn_flows, &rk);
	if (fv && !(fv->flags & FLOW_CLOSING)) {
		fv->flags |= FLOW_CLOSING;
		load_add(fv->nic, -1);
	}
	return 0;
}

/* least_loaded egress.  Returns the tc verdict, or -1: not a placeable flow, use NIC k (hash path). */
__attribute__((noinline)) long egress_placed(struct __sk_buff *skb, __u32 slot, __u32 cnt, __u32 k, __u32 family)
{
	struct flow_key fk = {};
	struct flow_val nv = {}, *fv;
	struct ecfg_val *ecfg;
	struct numa_val *nu;
	__u8 tflags = 0;
	int payload = 0;
	__u32 mask, j, idle_s, local = 0, spill = 0, zero = 0;
	__u64 now;
	long rc;

	ecfg = bpf_map_lookup_elem(&mn_ecfg, &zero);
	if (!ecfg)
		return -1;
	idle_s = ecfg->idle_s;
	nu = bpf_map_lookup_elem(&mn_numa, &slot);
	if (nu) {
		local = nu->local_mask;
		spill = nu->spill_flows;
	}
	if (flow_of(skb, family, &fk, &tflags, &payload) != 0)
		return -1;
	now = bpf_ktime_get_ns();
	fv = bpf_map_lookup_elem(&mn_flows, &fk);
	if (fv) {
		j = fv->nic;
		if (now > fv->last_ns + FLOW_TOUCH_NS)
			fv->last_ns = now;
		if ((tflags & TCPF_SYN) && !(tflags & (TCPF_FIN | TCPF_RST)) && (fv->flags & FLOW_CLOSING)) {
			/* the tuple is reused by a new connection: place it as a new flow */
			maybe_sweep(now, idle_s);
			mask = usable_mask(skb, family, cnt, MN_MAX_NICS);
			if (!mask)
				return -1;
			j = place_numa(mask, cnt, local, spill);
			fv->nic = j;
			fv->flags = 0;
			load_add(j, 1);
			rc = send_via(skb, j, family, ST_OUT_PLACED);
			return rc < 0 ? -1 : rc;
		}
		if ((tflags & (TCPF_FIN | TCPF_RST)) && !(fv->flags & FLOW_CLOSING)) {
			fv->flags |= FLOW_CLOSING;
			load_add(j, -1);
		}
		rc = send_via(skb, j, family, ST_OUT_PINNED);
		if (rc >= 0)
			return rc;
		/* its NIC no longer resolves its gateway: re-place the flow among the usable NICs */
		maybe_sweep(now, idle_s);
		mask = usable_mask(skb, family, cnt, j);
		if (!mask)
			return -1;
		nv.nic = place_numa(mask, cnt, local, spill);
		if (!(fv->flags & FLOW_CLOSING)) {
			load_add(j, -1);
			load_add(nv.nic, 1);
		}
		fv->nic = nv.nic;
		rc = send_via(skb, nv.nic, family, ST_OUT_REPLACED);
		return rc < 0 ? -1 : rc;
	}
	if (tflags & (TCPF_FIN | TCPF_RST))
		return -1; /* the end of an unknown (or just closed) flow: no entry */
	if (fk.proto == IPPROTO_TCP && !(tflags & TCPF_SYN) && !payload)
		return -1; /* pure ACK of an unknown flow (e.g. the last ACK after close): no entry */
	if (!src_any_nic(family, &fk, k, cnt))
		return -1; /* sourced from a container NIC address: stays on its NIC */
	maybe_sweep(now, idle_s);
	if (fk.proto == IPPROTO_TCP && !(tflags & TCPF_SYN)) {
		/* an established flow without an entry (policy just switched on, idle expiry, LRU
		 * eviction): pin it where the workload sends it, so it does not move mid-stream */
		mask = usable_mask(skb, family, cnt, MN_MAX_NICS);
		if (!mask)
			return -1;
		nv.nic = (k < MN_MAX_NICS && (mask & (1U << k))) ? k : place_numa(mask, cnt, local, spill);
	} else {
		mask = usable_mask(skb, family, cnt, MN_MAX_NICS);
		if (!mask)
			return -1;
		nv.nic = place_numa(mask, cnt, local, spill);
	}
	nv.last_ns = now;
	if (bpf_map_update_elem(&mn_flows, &fk, &nv, BPF_NOEXIST) == 0) {
		load_add(nv.nic, 1);
	} else {
		fv = bpf_map_lookup_elem(&mn_flows, &fk); /* another CPU placed it meanwhile */
		if (fv)
			nv.nic = fv->nic;
	}
	rc = send_via(skb, nv.nic, family, ST_OUT_PLACED);
	return rc < 0 ? -1 : rc;
}

#define NUMA_K_FAILED 0x100 /* hash_numa: NIC k (low bits) does not resolve its gateway */

/* hash policy with the slot's NUMA preference.  Returns the tc verdict, or -1: no preference, the
 * packet's NIC k is a usable local NIC, the source is a container NIC address (stays on its NIC),
 * or no local NIC is usable (then the plain path: NIC k, else even failover over all NICs). */
__attribute__((noinline)) long hash_numa(struct __sk_buff *skb, __u32 slot, __u32 cnt, __u32 k, __u32 family)
{
	struct numa_val *nu = bpf_map_lookup_elem(&mn_numa, &slot);
	struct flow_key fk = {};
	__u8 tflags = 0;
	int payload = 0;
	__u32 lm;
	long rc;

	if (!nu || !nu->local_mask)
		return -1;
	if (k & NUMA_K_FAILED)
		k &= ~NUMA_K_FAILED; /* NIC k is known unusable: among the other local NICs */
	else if (k < MN_MAX_NICS && (nu->local_mask & (1U << k)))
		return -1; /* a local NIC: the workload's choice (failover below calls again if unusable) */
	if (k >= MN_MAX_NICS)
		return -1;
	if (flow_of(skb, family, &fk, &tflags, &payload) != 0 || !src_any_nic(family, &fk, k, cnt))
		return -1;
	lm = usable_of(skb, family, cnt, nu->local_mask & ~(1U << k));
	if (!lm)
		return -1;
	rc = send_via(skb, nth_bit(lm, bpf_get_hash_recalc(skb) % bits(lm)), family, ST_OUT_REDIRECT);
	return rc < 0 ? -1 : rc;
}

SEC("tc")
int mn_veth_ingress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct bpf_fib_lookup p = {};
	struct bpf_redir_neigh nh = {};
	struct veth_val *vv;
	struct nic_val *n;
	struct cfg_val *cfg;
	struct ecfg_val *ecfg;
	__u32 family, k, cnt, zero = 0, mask;
	__u32 ifindex = skb->ifindex;
	int src;
	long rc;

	if ((void *)(eth + 1) > data_end)
		goto pass;
	if (skb->vlan_present)
		goto pass; /* tagged: the host has no VLAN device on the veth, the stack drops it */
	vv = bpf_map_lookup_elem(&mn_veth, &ifindex);
	if (!vv)
		goto pass;
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > data_end)
			goto spoof; /* truncated IPv6: no source to check */
		src = src_check6(vv, ip6);
		if (src < 0)
			goto spoof;
		if (src > 0)
			goto pass;
		if (v6_special(&ip6->daddr) || is_nd(data_end, ip6) ||
		    v6_embedded_v4(&ip6->daddr) || v6_embedded_v4(&ip6->saddr))
			goto pass;
		family = MN_AF_INET6;
		p.family = MN_AF_INET6;
		p.l4_protocol = ip6->nexthdr;
		__builtin_memcpy(p.ipv6_src, &ip6->saddr, 16);
		__builtin_memcpy(p.ipv6_dst, &ip6->daddr, 16);
	} else if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip4 = (void *)(eth + 1);

		if ((void *)(ip4 + 1) > data_end)
			goto spoof;
		src = src_check4(vv, ip4);
		if (src < 0)
			goto spoof;
		if (src > 0 || v4_special(ip4->daddr))
			goto pass;
		family = MN_AF_INET;
		p.family = MN_AF_INET;
		p.l4_protocol = ip4->protocol;
		p.tos = ip4->tos;
		p.ipv4_src = ip4->saddr;
		p.ipv4_dst = ip4->daddr;
	} else {
		goto pass; /* ARP: the host answers (proxy ARP for the link-local gateway) */
	}
	cfg = bpf_map_lookup_elem(&mn_cfg, &zero);
	if (!cfg)
		goto pass;

	/* 1. host-local?  One LPM lookup in the loader's mirror of the local + main tables. */
	if (cfg->flags & CFG_USE_LOCAL_MAP) {
		__u32 *verdict;

		if (family == MN_AF_INET) {
			struct lpm4_key k4 = {.prefixlen = 32, .addr = p.ipv4_dst};

			verdict = bpf_map_lookup_elem(&mn_local4, &k4);
		} else {
			struct lpm6_key k6 = {.prefixlen = 128};

			__builtin_memcpy(k6.addr, p.ipv6_dst, 16);
			verdict = bpf_map_lookup_elem(&mn_local6, &k6);
		}
		if (verdict && *verdict == LOCAL_STACK)
			goto local;
		goto nic;
	}
	/* Fallback: full lookup as the stack would do it for a packet arriving on this veth. */
	p.ifindex = ifindex;
	rc = bpf_fib_lookup(skb, &p, sizeof(p), BPF_FIB_LOOKUP_SKIP_NEIGH);
	if (rc == BPF_FIB_LKUP_RET_NOT_FWDED)
		goto local; /* local address, broadcast, ... */
	if ((rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH) &&
	    !is_nic_ifindex(p.ifindex))
		goto local; /* another workload on this host, a management interface, ... */

nic:
	k = vv->nic;
	cnt = cfg->nic_count;
	/* 2a. least_loaded: the flow's pinned NIC, or a new flow placed on the least loaded one */
	ecfg = bpf_map_lookup_elem(&mn_ecfg, &zero);
	if (ecfg && ecfg->policy == EGRESS_LEAST_LOADED && cnt >= 2 && cnt <= MN_MAX_NICS && k < cnt) {
		rc = egress_placed(skb, vv->slot, cnt, k, family);
		if (rc >= 0)
			return rc;
	} else if (cnt >= 2 && cnt <= MN_MAX_NICS && k < cnt) {
		/* 2b. hash with a NUMA preference: a task-IP flow the workload hashed onto a remote
		 * (or unusable local) NIC goes to a usable local NIC, chosen by flow hash */
		rc = hash_numa(skb, vv->slot, cnt, k, family);
		if (rc >= 0)
			return rc;
	}
	/* 2. the workload's choice: NIC k, if it still resolves its gateway */
	n = bpf_map_lookup_elem(&mn_nics, &k);
	if (n && nic_usable(skb, n, family, &nh) == 0) {
		count(ST_OUT_REDIRECT);
		return bpf_redirect_neigh(n->ifindex, &nh, sizeof(nh), 0);
	}

	/* 3. failover: spread NIC k's flows over all usable NICs by flow hash (hash % usable), so
	 * each survivor gets an equal part; stable per flow while the set of usable NICs holds */
	if (cnt < 2 || cnt > MN_MAX_NICS)
		goto noroute;
	rc = hash_numa(skb, vv->slot, cnt, k | NUMA_K_FAILED, family); /* local NICs first */
	if (rc >= 0)
		return rc;
	mask = usable_mask(skb, family, cnt, k);
	if (!mask)
		goto noroute;
	rc = send_via(skb, nth_bit(mask, bpf_get_hash_recalc(skb) % bits(mask)), family, ST_OUT_FAILOVER);
	if (rc >= 0)
		return rc;
noroute:
	count(ST_OUT_NOROUTE);
	return TC_ACT_OK;
local:
	count(ST_OUT_LOCAL);
	return TC_ACT_OK;
pass:
	count(ST_OUT_PASS);
	return TC_ACT_OK;
spoof:
	count_spoof(vv->slot);
	return TC_ACT_SHOT;
}

char _license[] SEC("license") = "GPL";
