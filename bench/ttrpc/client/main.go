// ttrpc-echo-client: closed-loop round trips of rainbench.Echo/Echo (a 64-byte payload in a
// google.protobuf.BytesValue, echoed back) against ttrpc-echo-server, one ttrpc.Client (one Unix
// connection) per goroutine, the same way c-floor-client and rainwallet-bench measure:
//
//	ttrpc-echo-client --socket PATH --connections N --seconds S [--payload BYTES]
//
// 0.5 s of warm-up (not counted), then S seconds. Prints one JSON line to stdout:
//
//	{"calls":…,"seconds":…,"callsPerSecond":…,"p50Micros":…,"p99Micros":…,"connections":N}
//
// calls counts the round trips started after the warm-up; seconds is the measured window (from the
// end of the warm-up to the last reply); percentiles are nearest-rank over all connections' samples.
// Errors go to stderr with a non-zero exit status.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"sort"
	"time"

	"github.com/containerd/ttrpc"
	"github.com/gogo/protobuf/types"
)

const warmup = 500 * time.Millisecond

type result struct {
	samples   []time.Duration
	lastReply time.Time
	err       error
}

func run(client *ttrpc.Client, payload []byte, warmEnd, end time.Time, out chan<- result) {
	var r result
	r.samples = make([]time.Duration, 0, 1<<16)
	req := &types.BytesValue{Value: payload}
	ctx := context.Background()
	for {
		t0 := time.Now()
		if !t0.Before(end) {
			break
		}
		var resp types.BytesValue
		if err := client.Call(ctx, "rainbench.Echo", "Echo", req, &resp); err != nil {
			r.err = err
			break
		}
		t1 := time.Now()
		if !bytes.Equal(resp.Value, payload) {
			r.err = fmt.Errorf("the echo differs from the request (%d bytes back, %d sent)", len(resp.Value), len(payload))
			break
		}
		if t0.Before(warmEnd) {
			continue
		}
		r.samples = append(r.samples, t1.Sub(t0))
		r.lastReply = t1
	}
	out <- r
}

// percentile is the nearest-rank percentile of sorted samples, in microseconds.
func percentile(sorted []time.Duration, p float64) float64 {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return float64(sorted[rank-1].Nanoseconds()) / 1000
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "ttrpc-echo-client: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	socket := flag.String("socket", "", "Unix socket path of ttrpc-echo-server")
	conns := flag.Int("connections", 1, "connections, one goroutine each")
	seconds := flag.Float64("seconds", 2, "seconds measured after the 0.5 s warm-up")
	size := flag.Int("payload", 64, "payload bytes")
	flag.Parse()
	if *socket == "" || *conns < 1 || *conns > 4096 || !(*seconds > 0) || *seconds > 86400 || *size < 0 || *size > 1<<20 || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: ttrpc-echo-client --socket PATH --connections N --seconds S [--payload BYTES]")
		os.Exit(2)
	}
	payload := make([]byte, *size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	clients := make([]*ttrpc.Client, *conns)
	for i := range clients {
		c, err := net.Dial("unix", *socket)
		if err != nil {
			fail("connect %s (connection %d of %d): %v", *socket, i+1, *conns, err)
		}
		clients[i] = ttrpc.NewClient(c)
	}
	start := time.Now()
	warmEnd := start.Add(warmup)
	end := warmEnd.Add(time.Duration(*seconds * float64(time.Second)))
	results := make(chan result, *conns)
	for _, c := range clients {
		go run(c, payload, warmEnd, end, results)
	}
	var all []time.Duration
	last := warmEnd
	for i := 0; i < *conns; i++ {
		r := <-results
		if r.err != nil {
			fail("connection: %v", r.err)
		}
		all = append(all, r.samples...)
		if r.lastReply.After(last) {
			last = r.lastReply
		}
	}
	for _, c := range clients {
		_ = c.Close()
	}
	if len(all) == 0 {
		fail("no call completed after the warm-up")
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	window := last.Sub(warmEnd).Seconds()
	if window <= 0 {
		window = *seconds
	}
	fmt.Printf("{\"calls\":%d,\"seconds\":%.3f,\"callsPerSecond\":%.1f,\"p50Micros\":%.1f,\"p99Micros\":%.1f,\"connections\":%d}\n",
		len(all), window, float64(len(all))/window, percentile(all, 50), percentile(all, 99), *conns)
}
