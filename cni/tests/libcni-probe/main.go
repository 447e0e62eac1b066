// libcni-probe: drives a CNI plugin through libcni (the library container runtimes use) and
// prints one JSON line describing the outcome, including the CNI error code that libcni
// decoded from the plugin's error JSON, so tests can assert on codes.
//
// usage: libcni-probe version PLUGIN_TYPE
//        libcni-probe add|check|del CONFLIST CONTAINER_ID NETNS IFNAME CACHE_DIR
// CNI_PATH (':'-separated) says where plugins are.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
)

func emit(v map[string]interface{}) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func failure(err error) map[string]interface{} {
	out := map[string]interface{}{"ok": false, "error": err.Error()}
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		out["code"] = cniErr.Code
		out["msg"] = cniErr.Msg
		out["details"] = cniErr.Details
	}
	return out
}

func main() {
	paths := filepath.SplitList(os.Getenv("CNI_PATH"))
	ctx := context.Background()
	if len(os.Args) == 3 && os.Args[1] == "version" {
		cni := libcni.NewCNIConfig(paths, nil)
		info, err := cni.GetVersionInfo(ctx, os.Args[2])
		if err != nil {
			emit(failure(err))
			return
		}
		emit(map[string]interface{}{"ok": true, "supportedVersions": info.SupportedVersions()})
		return
	}
	if len(os.Args) != 7 {
		fmt.Fprintln(os.Stderr, "usage: libcni-probe version TYPE | add|check|del CONFLIST CID NETNS IFNAME CACHE_DIR")
		os.Exit(2)
	}
	list, err := libcni.ConfListFromFile(os.Args[2])
	if err != nil {
		emit(failure(err))
		return
	}
	cni := libcni.NewCNIConfigWithCacheDir(paths, os.Args[6], nil)
	rt := &libcni.RuntimeConf{
		ContainerID: os.Args[3], NetNS: os.Args[4], IfName: os.Args[5],
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "probe-pod"}},
	}
	switch os.Args[1] {
	case "add":
		res, err := cni.AddNetworkList(ctx, list, rt)
		if err != nil {
			emit(failure(err))
			return
		}
		raw, _ := json.Marshal(res)
		var decoded interface{}
		_ = json.Unmarshal(raw, &decoded)
		emit(map[string]interface{}{"ok": true, "result": decoded})
	case "check":
		if err := cni.CheckNetworkList(ctx, list, rt); err != nil {
			emit(failure(err))
			return
		}
		emit(map[string]interface{}{"ok": true})
	case "del":
		if err := cni.DelNetworkList(ctx, list, rt); err != nil {
			emit(failure(err))
			return
		}
		emit(map[string]interface{}{"ok": true})
	default:
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
}
