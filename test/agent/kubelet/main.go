// SPDX-License-Identifier: Apache-2.0

// hpn-kubelet: a stand-in for the kubelet's side of the device plugin and
// PodResources APIs, for the agent's tests and the benchmark. Real gRPC
// (Debian's grpc-go), messages generated from the agent's own protos
// (agent/proto). It stands for what kubelet 1.26-1.31 does with a device
// plugin: serves Registration on <dir>/device-plugins/kubelet.sock (sweeping
// that directory first, as a starting kubelet does); on Register dials the
// plugin's endpoint, asks GetDevicePluginOptions and consumes ListAndWatch;
// serves PodResources List on <dir>/pod-resources/kubelet.sock from a JSON
// file the test writes (device plugin devices, and DRA claims' devices as
// dynamic_resources), after -podres-delay if one is given (a slow kubelet);
// and, as separate commands, calls Allocate and
// GetPreferredAllocation the way its device manager does at pod admission.
// As the plugin watcher and the DRA manager (dra-register, dra-prepare,
// dra-unprepare): GetInfo and NotifyRegistrationStatus on a DRA driver's
// registration socket, NodePrepareResources and NodeUnprepareResources in
// DRAPlugin v1 or v1beta1 (messages from agent/proto/dra-v1*.proto); and
// (dra-health) the DRA manager's device health stream, DRAResourceHealth's
// NodeWatchResources in the version the registration lists (as 1.37 picks
// it) or in v1alpha1 regardless (as 1.36 does), every message recorded.
// What it does not do: scheduling, the Topology Manager, checkpoints, the
// pod status the health feeds.
//
// serve writes one JSON line per event to -out: {"event":"register",...},
// {"event":"options",...}, {"event":"list","devices":[...]}, {"event":"list-end"}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	dp "hpnkubelet/deviceplugin"
	drahealth "hpnkubelet/drahealth"
	drav1 "hpnkubelet/drav1"
	drav1beta1 "hpnkubelet/drav1beta1"
	reg "hpnkubelet/pluginregistration"
	pr "hpnkubelet/podresources"
)

const usage = `usage: hpn-kubelet COMMAND [FLAGS]

  serve -dir DIR -out FILE [-pods FILE] [-podres-delay DURATION]
                                          the kubelet's servers (until SIGTERM);
                                          List answers after DURATION (1s, 500ms)
  allocate -socket SOCK IDS [IDS...]      Allocate, one container per IDS (a,b,c);
                                          prints the response as JSON (per container:
                                          envs, devices, mounts, annotations, cdi)
  prefer -socket SOCK -available a,b -must c -size N
                                          GetPreferredAllocation; prints the IDs
  bench -socket SOCK -n N IDS             N Allocate calls, then N ListAndWatch
                                          streams to their first list; one line
                                          per call: "allocate NS" / "listwatch NS"
  podres -dir DIR                          PodResources List (JSON)
  dra-register -dir DIR -driver NAME [-error MSG]
                                          as the plugin watcher: GetInfo on
                                          DIR/plugins_registry/NAME-reg.sock (type
                                          DRAPlugin, v1 and v1beta1 required), then
                                          NotifyRegistrationStatus (MSG: refused);
                                          prints the PluginInfo as JSON
  dra-prepare -socket SOCK -version v1|v1beta1 NS/NAME/UID...
  dra-unprepare -socket SOCK -version v1|v1beta1 NS/NAME/UID...
                                          as the DRA manager: one call for the
                                          claims; prints the answer as JSON, by UID
  dra-health -dir DIR -driver NAME -out FILE [-version auto|v1|v1alpha1] [-for DURATION]
                                          as the DRA manager: GetInfo on the driver's
                                          registration socket, then NodeWatchResources
                                          on its endpoint: auto (1.37) the newest
                                          DRAResourceHealth the registration lists
                                          (none listed: exit 3), else the version named
                                          (1.36: v1alpha1, listed or not); one JSON line
                                          per message to FILE ({"event":"health",...}),
                                          the stream closed after DURATION or at SIGTERM
  dra-bench -socket SOCK -n N NS/NAME/UID N rounds of one claim (v1): Prepare (the
                                          claim read from the API), Prepare again
                                          (from the record), Unprepare; each answer
                                          checked; one line per call:
                                          "prepare-api NS" / "prepare-record NS" /
                                          "unprepare NS"
`

// ---- serve -------------------------------------------------------------------

type events struct {
	mu sync.Mutex
	f  *os.File
}

func (e *events) put(v map[string]interface{}) {
	b, _ := json.Marshal(v)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.f.Write(append(b, '\n'))
}

type registration struct {
	dp.UnimplementedRegistrationServer
	dir string
	ev  *events
}

func devicesJSON(ds []*dp.Device) []interface{} {
	out := []interface{}{}
	for _, d := range ds {
		numa := []int64{}
		if d.Topology != nil {
			for _, n := range d.Topology.Nodes {
				numa = append(numa, n.ID)
			}
		}
		out = append(out, map[string]interface{}{"id": d.ID, "health": d.Health, "numa": numa})
	}
	return out
}

// watch is what the kubelet's endpoint manager does after a Register.
func (r *registration) watch(endpoint string) {
	sock, _ := filepath.Abs(filepath.Join(r.dir, "device-plugins", endpoint))
	conn, err := grpc.Dial("unix://"+sock, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithTimeout(5*time.Second))
	if err != nil {
		r.ev.put(map[string]interface{}{"event": "dial-error", "error": err.Error()})
		return
	}
	defer conn.Close()
	c := dp.NewDevicePluginClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	o, err := c.GetDevicePluginOptions(ctx, &dp.Empty{})
	cancel()
	if err != nil {
		r.ev.put(map[string]interface{}{"event": "options-error", "error": err.Error()})
		return
	}
	r.ev.put(map[string]interface{}{"event": "options",
		"preferred": o.GetPreferredAllocationAvailable, "preStart": o.PreStartRequired})
	s, err := c.ListAndWatch(context.Background(), &dp.Empty{})
	if err != nil {
		r.ev.put(map[string]interface{}{"event": "list-error", "error": err.Error()})
		return
	}
	for {
		m, err := s.Recv()
		if err != nil {
			r.ev.put(map[string]interface{}{"event": "list-end", "error": err.Error()})
			return
		}
		r.ev.put(map[string]interface{}{"event": "list", "devices": devicesJSON(m.Devices)})
	}
}

func (r *registration) Register(ctx context.Context, req *dp.RegisterRequest) (*dp.Empty, error) {
	pref := false
	if req.Options != nil {
		pref = req.Options.GetPreferredAllocationAvailable
	}
	r.ev.put(map[string]interface{}{"event": "register", "version": req.Version,
		"endpoint": req.Endpoint, "resource": req.ResourceName, "preferred": pref})
	if req.Version != "v1beta1" {
		return nil, fmt.Errorf("version %q is not v1beta1", req.Version)
	}
	go r.watch(req.Endpoint)
	return &dp.Empty{}, nil
}

// The pods file: [{"namespace","name","containers":[{"name",
// "devices":[{"resource","ids":[...]}],
// "dynamic":[{"claim","namespace","driver","pool","device","cdi":[...]}]}],
// "extended":{"claim","containers":[...],"devices":[{"driver","pool","device","cdi"}]}}]
// Each "dynamic" entry is one claim with one allocated device. "extended" is
// the claim the scheduler made for the pod's extended resources that DRA
// backs (KEP-5004, Kubernetes 1.34+ with DRAExtendedResource): the pod's
// status.extendedResourceClaimStatus names it and maps it to "containers".
// As kubelet 1.34-1.36 lists it (GetContainerClaimInfos): after a mapped
// container's own claims, one entry of the whole claim, every device in the
// allocation's order, whatever request of whichever container it serves; no
// device plugin "devices" for those resources (the device manager skips
// them).
type claimDevice struct {
	Driver string   `json:"driver"`
	Pool   string   `json:"pool"`
	Device string   `json:"device"`
	CDI    []string `json:"cdi"`
}

func (d claimDevice) resource() *pr.ClaimResource {
	res := &pr.ClaimResource{DriverName: d.Driver, PoolName: d.Pool, DeviceName: d.Device}
	for _, n := range d.CDI {
		res.CdiDevices = append(res.CdiDevices, &pr.CDIDevice{Name: n})
	}
	return res
}

type podFile []struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Extended  *struct {
		Claim      string        `json:"claim"`
		Containers []string      `json:"containers"`
		Devices    []claimDevice `json:"devices"`
	} `json:"extended"`
	Containers []struct {
		Name    string `json:"name"`
		Devices []struct {
			Resource string   `json:"resource"`
			IDs      []string `json:"ids"`
		} `json:"devices"`
		Dynamic []struct {
			Claim     string `json:"claim"`
			Namespace string `json:"namespace"`
			claimDevice
		} `json:"dynamic"`
	} `json:"containers"`
}

type podResources struct {
	pr.UnimplementedPodResourcesListerServer
	file  string
	delay time.Duration
	ev    *events
}

func (p *podResources) List(ctx context.Context, req *pr.ListPodResourcesRequest) (*pr.ListPodResourcesResponse, error) {
	resp := &pr.ListPodResourcesResponse{}
	if p.delay > 0 {
		// As a busy kubelet: its List does not watch the caller's deadline,
		// it answers late (the caller has given up by then).
		p.ev.put(map[string]interface{}{"event": "podresources-slow", "delay": p.delay.String()})
		time.Sleep(p.delay)
	}
	var pods podFile
	if b, err := os.ReadFile(p.file); err == nil {
		if err := json.Unmarshal(b, &pods); err != nil {
			return nil, err
		}
	}
	for _, pod := range pods {
		x := &pr.PodResources{Name: pod.Name, Namespace: pod.Namespace}
		for _, c := range pod.Containers {
			cr := &pr.ContainerResources{Name: c.Name}
			for _, d := range c.Devices {
				cr.Devices = append(cr.Devices, &pr.ContainerDevices{ResourceName: d.Resource, DeviceIds: d.IDs})
			}
			for _, d := range c.Dynamic {
				cr.DynamicResources = append(cr.DynamicResources, &pr.DynamicResource{
					ClaimName: d.Claim, ClaimNamespace: d.Namespace,
					ClaimResources: []*pr.ClaimResource{d.resource()}})
			}
			if x := pod.Extended; x != nil {
				for _, name := range x.Containers {
					if name != c.Name {
						continue
					}
					dr := &pr.DynamicResource{ClaimName: x.Claim, ClaimNamespace: pod.Namespace}
					for _, d := range x.Devices {
						dr.ClaimResources = append(dr.ClaimResources, d.resource())
					}
					cr.DynamicResources = append(cr.DynamicResources, dr)
				}
			}
			x.Containers = append(x.Containers, cr)
		}
		resp.PodResources = append(resp.PodResources, x)
	}
	p.ev.put(map[string]interface{}{"event": "podresources-list", "pods": len(resp.PodResources)})
	return resp, nil
}

func listen(path string) (net.Listener, error) {
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err == nil {
		os.Chmod(path, 0600)
	}
	return l, err
}

func serve(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	dir := fs.String("dir", "", "kubelet dir")
	out := fs.String("out", "", "events file")
	pods := fs.String("pods", "", "pods file")
	delay := fs.Duration("podres-delay", 0, "PodResources List answers after this long")
	fs.Parse(args)
	if *dir == "" || *out == "" {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ev := &events{f: f}
	dpDir := filepath.Join(*dir, "device-plugins")
	prDir := filepath.Join(*dir, "pod-resources")
	os.MkdirAll(dpDir, 0750)
	os.MkdirAll(prDir, 0750)
	// A starting kubelet removes every socket in device-plugins/.
	if ents, err := os.ReadDir(dpDir); err == nil {
		for _, e := range ents {
			os.Remove(filepath.Join(dpDir, e.Name()))
		}
	}
	reg := grpc.NewServer()
	dp.RegisterRegistrationServer(reg, &registration{dir: *dir, ev: ev})
	podres := grpc.NewServer()
	pr.RegisterPodResourcesListerServer(podres, &podResources{file: *pods, delay: *delay, ev: ev})
	l1, err := listen(filepath.Join(prDir, "kubelet.sock"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go podres.Serve(l1)
	l2, err := listen(filepath.Join(dpDir, "kubelet.sock"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go reg.Serve(l2)
	ev.put(map[string]interface{}{"event": "kubelet-started"})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	reg.Stop()
	podres.Stop()
	os.Remove(filepath.Join(dpDir, "kubelet.sock"))
	os.Remove(filepath.Join(prDir, "kubelet.sock"))
	return 0
}

// ---- calls as the device manager makes them -------------------------------------

func dial(sock string) (dp.DevicePluginClient, *grpc.ClientConn, error) {
	sock, _ = filepath.Abs(sock)
	conn, err := grpc.Dial("unix://"+sock, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithTimeout(5*time.Second))
	if err != nil {
		return nil, nil, err
	}
	return dp.NewDevicePluginClient(conn), conn, nil
}

func splitIDs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func allocReq(args []string) *dp.AllocateRequest {
	req := &dp.AllocateRequest{}
	for _, a := range args {
		req.ContainerRequests = append(req.ContainerRequests, &dp.ContainerAllocateRequest{DevicesIds: splitIDs(a)})
	}
	return req
}

func allocate(args []string) int {
	fs := flag.NewFlagSet("allocate", flag.ExitOnError)
	sock := fs.String("socket", "", "plugin socket")
	fs.Parse(args)
	c, conn, err := dial(*sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Allocate(ctx, allocReq(fs.Args()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := []interface{}{}
	for _, cr := range resp.ContainerResponses {
		devs := []interface{}{}
		for _, d := range cr.Devices {
			devs = append(devs, map[string]string{"container": d.ContainerPath,
				"host": d.HostPath, "permissions": d.Permissions})
		}
		mounts := len(cr.Mounts)
		cdi := []string{}
		for _, d := range cr.CdiDevices {
			cdi = append(cdi, d.Name)
		}
		out = append(out, map[string]interface{}{"envs": cr.Envs, "devices": devs,
			"mounts": mounts, "annotations": cr.Annotations, "cdi": cdi})
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	return 0
}

func prefer(args []string) int {
	fs := flag.NewFlagSet("prefer", flag.ExitOnError)
	sock := fs.String("socket", "", "plugin socket")
	avail := fs.String("available", "", "available IDs")
	must := fs.String("must", "", "IDs that must be in")
	size := fs.Int("size", 1, "allocation size")
	fs.Parse(args)
	c, conn, err := dial(*sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.GetPreferredAllocation(ctx, &dp.PreferredAllocationRequest{
		ContainerRequests: []*dp.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: splitIDs(*avail), MustIncludeDeviceIDs: splitIDs(*must),
			AllocationSize: int32(*size)}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, _ := json.Marshal(resp.ContainerResponses[0].DeviceIDs)
	fmt.Println(string(b))
	return 0
}

func bench(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	sock := fs.String("socket", "", "plugin socket")
	n := fs.Int("n", 200, "calls of each")
	fs.Parse(args)
	c, conn, err := dial(*sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	req := allocReq(fs.Args())
	var a, l []int64
	for i := 0; i < *n; i++ {
		t := time.Now()
		if _, err := c.Allocate(context.Background(), req); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		a = append(a, time.Since(t).Nanoseconds())
	}
	for i := 0; i < *n; i++ {
		t := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		s, err := c.ListAndWatch(ctx, &dp.Empty{})
		if err == nil {
			_, err = s.Recv()
		}
		l = append(l, time.Since(t).Nanoseconds())
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	sort.Slice(a, func(i, j int) bool { return a[i] < a[j] })
	for _, v := range a {
		fmt.Println("allocate", v)
	}
	for _, v := range l {
		fmt.Println("listwatch", v)
	}
	return 0
}

func podresList(args []string) int {
	fs := flag.NewFlagSet("podres", flag.ExitOnError)
	dir := fs.String("dir", "", "kubelet dir")
	fs.Parse(args)
	sock, _ := filepath.Abs(filepath.Join(*dir, "pod-resources", "kubelet.sock"))
	conn, err := grpc.Dial("unix://"+sock,
		grpc.WithInsecure(), grpc.WithBlock(), grpc.WithTimeout(5*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	resp, err := pr.NewPodResourcesListerClient(conn).List(context.Background(), &pr.ListPodResourcesRequest{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, _ := json.Marshal(resp)
	fmt.Println(string(b))
	return 0
}

// ---- the DRA plugin, as the plugin watcher and the DRA manager call it -------------

func dialConn(sock string) (*grpc.ClientConn, error) {
	sock, _ = filepath.Abs(sock)
	return grpc.Dial("unix://"+sock, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithTimeout(5*time.Second))
}

func draRegister(args []string) int {
	fs := flag.NewFlagSet("dra-register", flag.ExitOnError)
	dir := fs.String("dir", "", "the kubelet's directory")
	driver := fs.String("driver", "", "the driver's name")
	refuse := fs.String("error", "", "refuse the registration with this error")
	fs.Parse(args)
	conn, err := dialConn(filepath.Join(*dir, "plugins_registry", *driver+"-reg.sock"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	c := reg.NewRegistrationClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.GetInfo(ctx, &reg.InfoRequest{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, _ := json.Marshal(map[string]interface{}{"type": info.Type, "name": info.Name,
		"endpoint": info.Endpoint, "versions": info.SupportedVersions})
	fmt.Println(string(b))
	// What the kubelet's DRA handler checks before it takes a plugin.
	problem := ""
	has := map[string]bool{}
	for _, v := range info.SupportedVersions {
		has[v] = true
	}
	switch {
	case info.Type != "DRAPlugin":
		problem = "type " + info.Type + " is not DRAPlugin"
	case info.Name != *driver:
		problem = "name " + info.Name + " is not " + *driver
	case !has["v1.DRAPlugin"] || !has["v1beta1.DRAPlugin"]:
		problem = "versions lack v1.DRAPlugin or v1beta1.DRAPlugin"
	case !filepath.IsAbs(info.Endpoint):
		problem = "endpoint " + info.Endpoint + " is not absolute"
	}
	if problem == "" {
		problem = *refuse
	}
	_, err = c.NotifyRegistrationStatus(ctx, &reg.RegistrationStatus{
		PluginRegistered: problem == "", Error: problem})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if problem != "" && problem != *refuse {
		fmt.Fprintln(os.Stderr, problem)
		return 1
	}
	return 0
}

type claimRef struct{ ns, name, uid string }

func claimArgs(args []string) ([]claimRef, error) {
	out := []claimRef{}
	for _, a := range args {
		p := strings.Split(a, "/")
		if len(p) != 3 {
			return nil, fmt.Errorf("claim %q is not NS/NAME/UID", a)
		}
		out = append(out, claimRef{p[0], p[1], p[2]})
	}
	return out, nil
}

// draDial: the claims of args and a connection to the plugin's socket, or
// nil and the exit code (2: bad arguments, 1: no connection), said on stderr.
func draDial(sock string, args []string) ([]claimRef, *grpc.ClientConn, int) {
	claims, err := claimArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, nil, 2
	}
	conn, err := dialConn(sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, nil, 1
	}
	return claims, conn, 0
}

func draCall(args []string, prepare bool) int {
	name := "dra-unprepare"
	if prepare {
		name = "dra-prepare"
	}
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	sock := fs.String("socket", "", "the plugin's dra.sock")
	version := fs.String("version", "v1", "v1 or v1beta1")
	fs.Parse(args)
	claims, conn, code := draDial(*sock, fs.Args())
	if conn == nil {
		return code
	}
	defer conn.Close()
	// The kubelet's timeout for one call.
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var out map[string]interface{}
	var err error
	switch *version {
	case "v1":
		out, err = draV1(ctx, conn, claims, prepare)
	case "v1beta1":
		out, err = draV1beta1(ctx, conn, claims, prepare)
	default:
		err = fmt.Errorf("version %q is not v1 or v1beta1", *version)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	return 0
}

func draV1(ctx context.Context, conn *grpc.ClientConn, claims []claimRef, prepare bool) (map[string]interface{}, error) {
	c := drav1.NewDRAPluginClient(conn)
	req := []*drav1.Claim{}
	for _, q := range claims {
		req = append(req, &drav1.Claim{Namespace: q.ns, Name: q.name, Uid: q.uid})
	}
	out := map[string]interface{}{}
	if !prepare {
		resp, err := c.NodeUnprepareResources(ctx, &drav1.NodeUnprepareResourcesRequest{Claims: req})
		if err != nil {
			return nil, err
		}
		for uid, r := range resp.Claims {
			out[uid] = map[string]interface{}{"error": r.Error}
		}
		return out, nil
	}
	resp, err := c.NodePrepareResources(ctx, &drav1.NodePrepareResourcesRequest{Claims: req})
	if err != nil {
		return nil, err
	}
	for uid, r := range resp.Claims {
		devs := []interface{}{}
		for _, d := range r.Devices {
			devs = append(devs, map[string]interface{}{"requests": d.RequestNames,
				"pool": d.PoolName, "device": d.DeviceName, "cdi": d.CdiDeviceIds})
		}
		out[uid] = map[string]interface{}{"devices": devs, "error": r.Error}
	}
	return out, nil
}

func draV1beta1(ctx context.Context, conn *grpc.ClientConn, claims []claimRef, prepare bool) (map[string]interface{}, error) {
	c := drav1beta1.NewDRAPluginClient(conn)
	req := []*drav1beta1.Claim{}
	for _, q := range claims {
		req = append(req, &drav1beta1.Claim{Namespace: q.ns, Name: q.name, Uid: q.uid})
	}
	out := map[string]interface{}{}
	if !prepare {
		resp, err := c.NodeUnprepareResources(ctx, &drav1beta1.NodeUnprepareResourcesRequest{Claims: req})
		if err != nil {
			return nil, err
		}
		for uid, r := range resp.Claims {
			out[uid] = map[string]interface{}{"error": r.Error}
		}
		return out, nil
	}
	resp, err := c.NodePrepareResources(ctx, &drav1beta1.NodePrepareResourcesRequest{Claims: req})
	if err != nil {
		return nil, err
	}
	for uid, r := range resp.Claims {
		devs := []interface{}{}
		for _, d := range r.Devices {
			devs = append(devs, map[string]interface{}{"requests": d.RequestNames,
				"pool": d.PoolName, "device": d.DeviceName, "cdi": d.CdiDeviceIds})
		}
		out[uid] = map[string]interface{}{"devices": devs, "error": r.Error}
	}
	return out, nil
}

// draBench: the driver's latency per call, as the DRA manager sees it. Every
// answer is checked (the claim's, with devices and no error), so a figure is
// never that of a failed call.
func draBench(args []string) int {
	fs := flag.NewFlagSet("dra-bench", flag.ExitOnError)
	sock := fs.String("socket", "", "the plugin's dra.sock")
	n := fs.Int("n", 100, "rounds")
	fs.Parse(args)
	if fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "dra-bench: one claim, NS/NAME/UID")
		return 2
	}
	claims, conn, code := draDial(*sock, fs.Args())
	if conn == nil {
		return code
	}
	defer conn.Close()
	q := claims[0]
	c := drav1.NewDRAPluginClient(conn)
	req := []*drav1.Claim{{Namespace: q.ns, Name: q.name, Uid: q.uid}}
	times := map[string][]int64{}
	prepare := func(what string) error {
		t := time.Now()
		resp, err := c.NodePrepareResources(context.Background(),
			&drav1.NodePrepareResourcesRequest{Claims: req})
		times[what] = append(times[what], time.Since(t).Nanoseconds())
		if err != nil {
			return err
		}
		r := resp.Claims[q.uid]
		if r == nil || r.Error != "" || len(r.Devices) == 0 {
			return fmt.Errorf("%s: claim %s/%s not prepared: %v", what, q.ns, q.name, r)
		}
		return nil
	}
	for i := 0; i < *n; i++ {
		for _, what := range []string{"prepare-api", "prepare-record"} {
			if err := prepare(what); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		t := time.Now()
		resp, err := c.NodeUnprepareResources(context.Background(),
			&drav1.NodeUnprepareResourcesRequest{Claims: req})
		times["unprepare"] = append(times["unprepare"], time.Since(t).Nanoseconds())
		if err == nil && (resp.Claims[q.uid] == nil || resp.Claims[q.uid].Error != "") {
			err = fmt.Errorf("unprepare: claim %s/%s: %v", q.ns, q.name, resp.Claims[q.uid])
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	for _, what := range []string{"prepare-api", "prepare-record", "unprepare"} {
		v := times[what]
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		for _, ns := range v {
			fmt.Println(what, ns)
		}
	}
	return 0
}

// ---- the DRA manager's device health stream ----------------------------------------

// healthService picks the health service of a registration's list as the 1.37
// kubelet does: v1 before v1alpha1, "" when neither is listed.
func healthService(listed []string) string {
	for _, want := range []string{"v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"} {
		for _, v := range listed {
			if v == want {
				return want
			}
		}
	}
	return ""
}

func healthJSON(m *drahealth.NodeWatchResourcesResponse) []interface{} {
	out := []interface{}{}
	for _, d := range m.Devices {
		out = append(out, map[string]interface{}{"pool": d.GetDevice().GetPoolName(),
			"device": d.GetDevice().GetDeviceName(), "health": d.Health.String(),
			"message": d.Message, "lastUpdated": d.LastUpdatedTime,
			"timeout": d.HealthCheckTimeoutSeconds})
	}
	return out
}

func draHealth(args []string) int {
	fs := flag.NewFlagSet("dra-health", flag.ExitOnError)
	dir := fs.String("dir", "", "the kubelet's directory")
	driver := fs.String("driver", "", "the driver's name")
	out := fs.String("out", "", "events file")
	version := fs.String("version", "auto", "auto (from the registration), v1 or v1alpha1")
	dur := fs.Duration("for", 0, "close the stream after this long (0: at SIGTERM)")
	fs.Parse(args)
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ev := &events{f: f}
	rconn, err := dialConn(filepath.Join(*dir, "plugins_registry", *driver+"-reg.sock"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	info, err := reg.NewRegistrationClient(rconn).GetInfo(ctx, &reg.InfoRequest{})
	cancel()
	rconn.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	service := *version + ".DRAResourceHealth"
	if *version == "auto" {
		service = healthService(info.SupportedVersions)
	}
	if service == "" {
		ev.put(map[string]interface{}{"event": "health-none", "versions": info.SupportedVersions})
		fmt.Fprintln(os.Stderr, "the registration lists no DRAResourceHealth:", info.SupportedVersions)
		return 3
	}
	conn, err := dialConn(info.Endpoint)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	// v1 and v1alpha1 are the same messages: one generated set, the path says which.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	desc := &grpc.StreamDesc{StreamName: "NodeWatchResources", ServerStreams: true}
	s, err := conn.NewStream(ctx, desc, "/"+service+"/NodeWatchResources")
	if err == nil {
		err = s.SendMsg(&drahealth.NodeWatchResourcesRequest{})
	}
	if err == nil {
		err = s.CloseSend()
	}
	if err != nil {
		ev.put(map[string]interface{}{"event": "health-error", "error": err.Error()})
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ev.put(map[string]interface{}{"event": "health-open", "service": service})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		if *dur > 0 {
			select {
			case <-sig:
			case <-time.After(*dur):
			}
		} else {
			<-sig
		}
		ev.put(map[string]interface{}{"event": "health-closing"})
		cancel()
	}()
	last := time.Now()
	for {
		m := &drahealth.NodeWatchResourcesResponse{}
		if err := s.RecvMsg(m); err != nil {
			ev.put(map[string]interface{}{"event": "health-end", "error": err.Error()})
			if ctx.Err() != nil {
				return 0
			}
			return 1
		}
		now := time.Now()
		ev.put(map[string]interface{}{"event": "health", "service": service,
			"at": float64(now.UnixNano()) / 1e9, "gap": now.Sub(last).Seconds(),
			"devices": healthJSON(m)})
		last = now
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmds := map[string]func([]string) int{"serve": serve, "allocate": allocate,
		"prefer": prefer, "bench": bench, "podres": podresList,
		"dra-register": draRegister, "dra-bench": draBench, "dra-health": draHealth,
		"dra-prepare":   func(a []string) int { return draCall(a, true) },
		"dra-unprepare": func(a []string) int { return draCall(a, false) }}
	f, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	os.Exit(f(os.Args[2:]))
}
