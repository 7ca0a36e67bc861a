// ttrpc-echo-server: containerd's ttrpc (Debian's golang-github-containerd-ttrpc-dev 1.1.1) serving
// one method, rainbench.Echo/Echo, that answers with the request's payload (a 64-byte
// google.protobuf.BytesValue from the bench client). The peer scripts/bench sets beside the C floor
// and rainwalletd.
//
//	ttrpc-echo-server SOCKET_PATH
//
// SIGTERM/SIGINT remove the socket and exit 0. Built by scripts/bench in GOPATH mode
// (GO111MODULE=off GOPATH=/usr/share/gocode), no module download.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/containerd/ttrpc"
	"github.com/gogo/protobuf/types"
)

func main() {
	if len(os.Args) != 2 || len(os.Args[1]) == 0 || os.Args[1][0] == '-' {
		fmt.Fprintln(os.Stderr, "usage: ttrpc-echo-server SOCKET_PATH")
		os.Exit(2)
	}
	path := os.Args[1]
	server, err := ttrpc.NewServer()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ttrpc-echo-server: %v\n", err)
		os.Exit(1)
	}
	server.Register("rainbench.Echo", map[string]ttrpc.Method{
		"Echo": func(ctx context.Context, unmarshal func(interface{}) error) (interface{}, error) {
			var req types.BytesValue
			if err := unmarshal(&req); err != nil {
				return nil, err
			}
			return &req, nil
		},
	})
	_ = os.Remove(path) // a stale socket from an earlier run
	listener, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ttrpc-echo-server: listen %s: %v\n", path, err)
		os.Exit(1)
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		_ = os.Remove(path)
		os.Exit(0)
	}()
	if err := server.Serve(context.Background(), listener); err != nil {
		fmt.Fprintf(os.Stderr, "ttrpc-echo-server: serve: %v\n", err)
		_ = os.Remove(path)
		os.Exit(1)
	}
}
