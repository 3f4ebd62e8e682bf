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
 *                   used instead.  Host-local, ND/ARP, link-local, multicast -> TC_ACT_OK.
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
	__u32 flags;   /* bit 0: gw4 valid, bit 1: gw6 valid */
	__u32 gw4;     /* network order */
	__u8 gw6[16];
};

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

SEC("tc")
int mn_nic_ingress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct ing_key key = {};
	struct ing_val *val;

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

/* Does NIC n still resolve its gateway (host main table, oif = the NIC)?  0 = yes. */
static __always_inline int nic_usable(struct __sk_buff *skb, struct nic_val *n, __u32 family,
				      struct bpf_redir_neigh *nh)
{
	struct bpf_fib_lookup p = {};
	long rc;

	if (!n->ifindex)
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
	__u32 family, k, cnt, zero = 0, start;
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
	/* 2. the workload's choice: NIC k, if it still resolves its gateway */
	k = vv->nic;
	n = bpf_map_lookup_elem(&mn_nics, &k);
	if (n && nic_usable(skb, n, family, &nh) == 0) {
		count(ST_OUT_REDIRECT);
		return bpf_redirect_neigh(n->ifindex, &nh, sizeof(nh), 0);
	}

	/* 3. failover: a surviving NIC, chosen by flow hash so the load spreads */
	cnt = cfg->nic_count;
	if (cnt < 2 || cnt > MN_MAX_NICS)
		goto noroute;
	start = bpf_get_hash_recalc(skb) % cnt;
#pragma clang loop unroll(full)
	for (__u32 i = 0; i < MN_MAX_NICS; i++) {
		__u32 j;

		if (i >= cnt)
			break;
		j = (start + i) % cnt;
		if (j == k)
			continue;
		n = bpf_map_lookup_elem(&mn_nics, &j);
		if (n && nic_usable(skb, n, family, &nh) == 0) {
			count(ST_OUT_FAILOVER);
			return bpf_redirect_neigh(n->ifindex, &nh, sizeof(nh), 0);
		}
	}
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
