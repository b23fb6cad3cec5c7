// Test bed only (never shipped; clusterctl's own code, not upstream's): checks a kind Cluster config
// the way `kind create cluster --config` reads it. scripts/k8s/kind-check.sh builds this file as a
// main package placed INSIDE a temporary copy of the sigs.k8s.io/kind module (at pkg/cluster/clusterctlcheck),
// so that it may import kind's internal packages:
//
//   - sigs.k8s.io/kind/pkg/internal/apis/config/encoding.Load: kind's own loader (strict YAML decoding of
//     kind.x-k8s.io/v1alpha4, defaults, conversion to the internal config);
//   - (*config.Cluster).Validate: kind's own validation (node roles, mounts, port mappings, subnets, patches);
//   - sigs.k8s.io/kind/pkg/cluster/internal/kubeadm.Config and sigs.k8s.io/kind/pkg/internal/patch.KubeYAML:
//     the kubeadm config kind generates for each node of a given Kubernetes version and the
//     kubeadmConfigPatches applied to it, cluster-level first, then the node's own, as kind's
//     create/actions/config.getKubeadmConfig does.
//
// Usage: kind-check KIND_CONFIG KUBERNETES_VERSION OUT_DIR
//
// Writes OUT_DIR/<n>.yaml (n = the node's index in the config) with the kubeadm config kind would write
// to that node's /kind/kubeadm.conf, and prints one JSON object to stdout:
//
//	{"name": ..., "nodes": [{"index": 0, "name": "c-control-plane", "role": "control-plane",
//	  "bootstrap": true, "file": "OUT_DIR/0.yaml", "mounts": [{"hostPath": ..., "containerPath": ...}]}]}
//
// Exit 1 with kind's error on stderr when loading, validation, generation or patching fails.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/kind/pkg/cluster/constants"
	"sigs.k8s.io/kind/pkg/cluster/internal/kubeadm"
	"sigs.k8s.io/kind/pkg/cluster/internal/providers/common"
	"sigs.k8s.io/kind/pkg/internal/apis/config"
	"sigs.k8s.io/kind/pkg/internal/apis/config/encoding"
	"sigs.k8s.io/kind/pkg/internal/patch"
)

type mount struct {
	HostPath      string `json:"hostPath"`
	ContainerPath string `json:"containerPath"`
	ReadOnly      bool   `json:"readOnly"`
}

type node struct {
	Index     int     `json:"index"`
	Name      string  `json:"name"`
	Role      string  `json:"role"`
	Bootstrap bool    `json:"bootstrap"`
	File      string  `json:"file"`
	Mounts    []mount `json:"mounts"`
}

type result struct {
	Name  string `json:"name"`
	Nodes []node `json:"nodes"`
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "kind-check: %s: %v\n", what, err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: kind-check KIND_CONFIG KUBERNETES_VERSION OUT_DIR")
		os.Exit(2)
	}
	path, version, out := os.Args[1], os.Args[2], os.Args[3]
	cfg, err := encoding.Load(path)
	if err != nil {
		fail("load "+path, err)
	}
	if err := cfg.Validate(); err != nil {
		fail("validate "+path, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		fail("mkdir", err)
	}
	controlPlanes := 0
	for _, n := range cfg.Nodes {
		if n.Role == config.ControlPlaneRole {
			controlPlanes++
		}
	}
	// kind's endpoint: the external load balancer with more than one control plane, else the control plane.
	endpoint := cfg.Name + "-" + constants.ControlPlaneNodeRoleValue + ":6443"
	if controlPlanes > 1 {
		endpoint = cfg.Name + "-" + constants.ExternalLoadBalancerNodeRoleValue + ":6443"
	}
	namer := common.MakeNodeNamer(cfg.Name)
	res := result{Name: cfg.Name}
	bootstrapDone := false
	for i := range cfg.Nodes {
		n := &cfg.Nodes[i]
		name := namer(string(n.Role))
		cp := n.Role == config.ControlPlaneRole
		data := kubeadm.ConfigData{
			NodeProvider:         "docker",
			ClusterName:          cfg.Name,
			KubernetesVersion:    version,
			ControlPlaneEndpoint: endpoint,
			APIBindPort:          6443,
			APIServerAddress:     cfg.Networking.APIServerAddress,
			Token:                kubeadm.Token,
			PodSubnet:            cfg.Networking.PodSubnet,
			ServiceSubnet:        cfg.Networking.ServiceSubnet,
			KubeProxyMode:        string(cfg.Networking.KubeProxyMode),
			IPFamily:             cfg.Networking.IPFamily,
			FeatureGates:         cfg.FeatureGates,
			RuntimeConfig:        cfg.RuntimeConfig,
			ControlPlane:         cp,
			NodeName:             name,
			NodeAddress:          fmt.Sprintf("172.18.0.%d", i+2),
		}
		if cfg.Networking.IPFamily == config.IPv6Family {
			data.NodeAddress = fmt.Sprintf("fc00:f853:ccd:e793::%d", i+2)
		}
		if len(n.Labels) > 0 {
			keys := make([]string, 0, len(n.Labels))
			for k := range n.Labels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := make([]string, 0, len(keys))
			for _, k := range keys {
				parts = append(parts, k+"="+n.Labels[k])
			}
			data.NodeLabels = strings.Join(parts, ",")
		}
		generated, err := kubeadm.Config(data)
		if err != nil {
			fail("kubeadm config for "+name, err)
		}
		patched, err := patch.KubeYAML(generated, cfg.KubeadmConfigPatches, cfg.KubeadmConfigPatchesJSON6902)
		if err != nil {
			fail("cluster patches for "+name, err)
		}
		if len(n.KubeadmConfigPatches) > 0 || len(n.KubeadmConfigPatchesJSON6902) > 0 {
			patched, err = patch.KubeYAML(patched, n.KubeadmConfigPatches, n.KubeadmConfigPatchesJSON6902)
			if err != nil {
				fail("node patches for "+name, err)
			}
		}
		// as kind's removeMetadata: the name kind puts in for matching, which kubeadm would refuse
		patched = strings.ReplaceAll(patched, "metadata:\n  name: config\n", "")
		file := filepath.Join(out, fmt.Sprintf("%d.yaml", i))
		if err := os.WriteFile(file, []byte(patched), 0o600); err != nil {
			fail("write", err)
		}
		mounts := []mount{}
		for _, m := range n.ExtraMounts {
			mounts = append(mounts, mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadOnly: m.Readonly})
		}
		res.Nodes = append(res.Nodes, node{
			Index: i, Name: name, Role: string(n.Role), Bootstrap: cp && !bootstrapDone, File: file, Mounts: mounts,
		})
		if cp {
			bootstrapDone = true
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fail("encode", err)
	}
}
