// SPDX-License-Identifier: Apache-2.0

// hpn-cri: a small CRI client for the runtime test tier and the benchmark. It
// makes the calls kubelet makes to run a pod (RunPodSandbox, CreateContainer,
// StartContainer, ExecSync, StopContainer, StopPodSandbox, RemovePodSandbox)
// over containerd's CRI socket, one call per invocation, so shell scenarios
// can drive a real runtime step by step. Configs are CRI messages in proto3
// JSON (PodSandboxConfig, ContainerConfig), as kubelet would build them from
// a Pod.
//
// Exit status: 0 done; 1 the call failed (the runtime's error on stderr,
// which carries a CNI plugin's message when RunPodSandbox fails in the
// network setup); 2 usage. exec exits with the command's own status, or 125
// when the call itself failed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "hpncri/runtimev1"
)

const usage = `usage: hpn-cri [-a SOCKET] [-timeout SECONDS] COMMAND [ARGS]

  version                      runtime name and versions (JSON)
  status [-v]                  runtime conditions (JSON; -v adds containerd's info)
  runp POD.json                RunPodSandbox; prints the sandbox ID
  stopp ID...                  StopPodSandbox
  rmp ID...                    RemovePodSandbox
  inspectp ID                  PodSandboxStatus, verbose (JSON: status, info)
  pods                         ListPodSandbox (JSON)
  create POD_ID CTR.json POD.json
                               CreateContainer; prints the container ID
  start ID...                  StartContainer
  stop [-t SECONDS] ID...      StopContainer (default 0: kill at once)
  rm ID...                     RemoveContainer
  ps [-p POD_ID]               ListContainers (JSON)
  inspect ID                   ContainerStatus (JSON: state, exitCode, reason...)
  exec [-t SECONDS] ID CMD...  ExecSync: the command's stdout and stderr, its exit status
  cycle [-n N] [-w W] POD.json RunPodSandbox, StopPodSandbox, RemovePodSandbox of the
                               pod, W times unmeasured then N times, one process (no
                               client start in the figures); prints one line per measured
                               cycle: the three calls' wall times in ns

A file argument "-" is standard input. The JSON files are proto3 JSON of the
CRI messages PodSandboxConfig and ContainerConfig (agent/proto/cri.proto).
`

type client struct {
	rt      pb.RuntimeServiceClient
	timeout time.Duration
}

func (c *client) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.timeout)
}

func die(code int, format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "hpn-cri: "+format+"\n", a...)
	os.Exit(code)
}

func readMessage(path string, m proto.Message) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		die(2, "%v", err)
	}
	if err := protojson.Unmarshal(data, m); err != nil {
		die(2, "%s: not a %s in proto3 JSON: %v", path, m.ProtoReflect().Descriptor().Name(), err)
	}
}

func printMessage(m proto.Message) {
	out, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		die(1, "%v", err)
	}
	fmt.Println(string(out))
}

// subFlags parses a command's own flags; returns the remaining arguments.
func subFlags(name string, args []string, define func(*flag.FlagSet), min int) []string {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	if define != nil {
		define(fs)
	}
	if err := fs.Parse(args); err != nil {
		die(2, "%v", err)
	}
	if fs.NArg() < min {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	return fs.Args()
}

func (c *client) call(name string, f func(ctx context.Context) error) {
	ctx, cancel := c.ctx()
	defer cancel()
	if err := f(ctx); err != nil {
		die(1, "%s: %v", name, err)
	}
}

func main() {
	addr := flag.String("a", os.Getenv("HPN_CRI_SOCKET"), "the runtime's CRI socket (default $HPN_CRI_SOCKET)")
	secs := flag.Int("timeout", 120, "seconds each call may take")
	flag.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	flag.Parse()
	if flag.NArg() < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if *addr == "" {
		die(2, "no socket: -a SOCKET or HPN_CRI_SOCKET")
	}
	target := *addr
	if !strings.Contains(target, "://") {
		target = "unix://" + target
	}
	dctx, dcancel := context.WithTimeout(context.Background(), time.Duration(*secs)*time.Second)
	conn, err := grpc.DialContext(dctx, target, grpc.WithInsecure(), grpc.WithBlock())
	dcancel()
	if err != nil {
		die(1, "connect %s: %v", *addr, err)
	}
	defer conn.Close()
	c := &client{rt: pb.NewRuntimeServiceClient(conn), timeout: time.Duration(*secs) * time.Second}

	cmd, args := flag.Arg(0), flag.Args()[1:]
	switch cmd {
	case "version":
		subFlags(cmd, args, nil, 0)
		c.call("Version", func(ctx context.Context) error {
			r, err := c.rt.Version(ctx, &pb.VersionRequest{Version: "v1"})
			if err == nil {
				printMessage(r)
			}
			return err
		})
	case "status":
		var verbose bool
		subFlags(cmd, args, func(fs *flag.FlagSet) { fs.BoolVar(&verbose, "v", false, "") }, 0)
		c.call("Status", func(ctx context.Context) error {
			r, err := c.rt.Status(ctx, &pb.StatusRequest{Verbose: verbose})
			if err == nil {
				printWithInfo(r.Status, r.Info)
			}
			return err
		})
	case "runp":
		a := subFlags(cmd, args, nil, 1)
		cfg := &pb.PodSandboxConfig{}
		readMessage(a[0], cfg)
		c.call("RunPodSandbox", func(ctx context.Context) error {
			r, err := c.rt.RunPodSandbox(ctx, &pb.RunPodSandboxRequest{Config: cfg})
			if err == nil {
				fmt.Println(r.PodSandboxId)
			}
			return err
		})
	case "stopp", "rmp":
		for _, id := range subFlags(cmd, args, nil, 1) {
			if cmd == "stopp" {
				c.call("StopPodSandbox", func(ctx context.Context) error {
					_, err := c.rt.StopPodSandbox(ctx, &pb.StopPodSandboxRequest{PodSandboxId: id})
					return err
				})
			} else {
				c.call("RemovePodSandbox", func(ctx context.Context) error {
					_, err := c.rt.RemovePodSandbox(ctx, &pb.RemovePodSandboxRequest{PodSandboxId: id})
					return err
				})
			}
		}
	case "inspectp":
		a := subFlags(cmd, args, nil, 1)
		c.call("PodSandboxStatus", func(ctx context.Context) error {
			r, err := c.rt.PodSandboxStatus(ctx, &pb.PodSandboxStatusRequest{PodSandboxId: a[0], Verbose: true})
			if err == nil {
				printWithInfo(r.Status, r.Info)
			}
			return err
		})
	case "pods":
		subFlags(cmd, args, nil, 0)
		c.call("ListPodSandbox", func(ctx context.Context) error {
			r, err := c.rt.ListPodSandbox(ctx, &pb.ListPodSandboxRequest{})
			if err == nil {
				printMessage(r)
			}
			return err
		})
	case "create":
		a := subFlags(cmd, args, nil, 3)
		ctr, pod := &pb.ContainerConfig{}, &pb.PodSandboxConfig{}
		readMessage(a[1], ctr)
		readMessage(a[2], pod)
		c.call("CreateContainer", func(ctx context.Context) error {
			r, err := c.rt.CreateContainer(ctx, &pb.CreateContainerRequest{
				PodSandboxId: a[0], Config: ctr, SandboxConfig: pod})
			if err == nil {
				fmt.Println(r.ContainerId)
			}
			return err
		})
	case "start", "rm":
		for _, id := range subFlags(cmd, args, nil, 1) {
			if cmd == "start" {
				c.call("StartContainer", func(ctx context.Context) error {
					_, err := c.rt.StartContainer(ctx, &pb.StartContainerRequest{ContainerId: id})
					return err
				})
			} else {
				c.call("RemoveContainer", func(ctx context.Context) error {
					_, err := c.rt.RemoveContainer(ctx, &pb.RemoveContainerRequest{ContainerId: id})
					return err
				})
			}
		}
	case "stop":
		var grace int64
		ids := subFlags(cmd, args, func(fs *flag.FlagSet) { fs.Int64Var(&grace, "t", 0, "") }, 1)
		for _, id := range ids {
			c.call("StopContainer", func(ctx context.Context) error {
				_, err := c.rt.StopContainer(ctx, &pb.StopContainerRequest{ContainerId: id, Timeout: grace})
				return err
			})
		}
	case "ps":
		var pod string
		subFlags(cmd, args, func(fs *flag.FlagSet) { fs.StringVar(&pod, "p", "", "") }, 0)
		c.call("ListContainers", func(ctx context.Context) error {
			r, err := c.rt.ListContainers(ctx, &pb.ListContainersRequest{
				Filter: &pb.ContainerFilter{PodSandboxId: pod}})
			if err == nil {
				printMessage(r)
			}
			return err
		})
	case "inspect":
		a := subFlags(cmd, args, nil, 1)
		c.call("ContainerStatus", func(ctx context.Context) error {
			r, err := c.rt.ContainerStatus(ctx, &pb.ContainerStatusRequest{ContainerId: a[0]})
			if err == nil {
				printMessage(r.Status)
			}
			return err
		})
	case "exec":
		var limit int64
		a := subFlags(cmd, args, func(fs *flag.FlagSet) { fs.Int64Var(&limit, "t", 30, "") }, 2)
		ctx, cancel := c.ctx()
		r, err := c.rt.ExecSync(ctx, &pb.ExecSyncRequest{ContainerId: a[0], Cmd: a[1:], Timeout: limit})
		cancel()
		if err != nil {
			die(125, "ExecSync: %v", err)
		}
		os.Stdout.Write(r.Stdout)
		os.Stderr.Write(r.Stderr)
		os.Exit(int(r.ExitCode))
	case "cycle":
		var n, warm int
		a := subFlags(cmd, args, func(fs *flag.FlagSet) {
			fs.IntVar(&n, "n", 10, "")
			fs.IntVar(&warm, "w", 0, "")
		}, 1)
		cfg := &pb.PodSandboxConfig{}
		readMessage(a[0], cfg)
		for i := 0; i < warm+n; i++ {
			var id string
			t0 := time.Now()
			c.call("RunPodSandbox", func(ctx context.Context) error {
				r, err := c.rt.RunPodSandbox(ctx, &pb.RunPodSandboxRequest{Config: cfg})
				if err == nil {
					id = r.PodSandboxId
				}
				return err
			})
			t1 := time.Now()
			c.call("StopPodSandbox", func(ctx context.Context) error {
				_, err := c.rt.StopPodSandbox(ctx, &pb.StopPodSandboxRequest{PodSandboxId: id})
				return err
			})
			t2 := time.Now()
			c.call("RemovePodSandbox", func(ctx context.Context) error {
				_, err := c.rt.RemovePodSandbox(ctx, &pb.RemovePodSandboxRequest{PodSandboxId: id})
				return err
			})
			t3 := time.Now()
			if i >= warm {
				fmt.Println(t1.Sub(t0).Nanoseconds(), t2.Sub(t1).Nanoseconds(), t3.Sub(t2).Nanoseconds())
			}
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
}

// printWithInfo prints {"status": M, "info": {...}}: containerd's info values
// are JSON documents in strings, shown as JSON where they parse.
func printWithInfo(m proto.Message, info map[string]string) {
	st, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		die(1, "%v", err)
	}
	out := map[string]json.RawMessage{"status": st}
	in := map[string]json.RawMessage{}
	for k, v := range info {
		if json.Valid([]byte(v)) {
			in[k] = json.RawMessage(v)
		} else {
			s, _ := json.Marshal(v)
			in[k] = s
		}
	}
	b, err := json.Marshal(in)
	if err != nil {
		die(1, "%v", err)
	}
	out["info"] = b
	b, err = json.Marshal(out)
	if err != nil {
		die(1, "%v", err)
	}
	fmt.Println(string(b))
}
