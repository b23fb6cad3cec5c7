// Test bed only (never shipped): prints kind's default CNI manifest — the Go constant
// `defaultCNIManifest` of sigs.k8s.io/kind's pkg/build/nodeimage/const_cni.go, the bytes kind's node
// image build writes to /kind/manifests/default-cni.yaml — by type-checking that one file and reading
// the constant's value (it is a concatenation with `kindnetdImage`, so a text search would not do).
//
//	go run scripts/k8s/kind-cni.go < <kind module dir>/pkg/build/nodeimage/const_cni.go
//
// (on standard input: `go run` takes every argument ending in .go for a file of the program).
//
// Nothing of kind is kept in the repository; scripts/k8s/build.sh runs this on the module the Go
// module proxy serves at the pinned kind version.
package main

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
)

func main() {
	src, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "read:", err)
		os.Exit(1)
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "const_cni.go", src, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "parse:", err)
		os.Exit(1)
	}
	pkg, err := new(types.Config).Check(file.Name.Name, fset, []*ast.File{file}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "type-check:", err)
		os.Exit(1)
	}
	c, ok := pkg.Scope().Lookup("defaultCNIManifest").(*types.Const)
	if !ok || c.Val().Kind() != constant.String {
		fmt.Fprintln(os.Stderr, "no string constant defaultCNIManifest in const_cni.go")
		os.Exit(1)
	}
	fmt.Print(constant.StringVal(c.Val()))
}
