// Package layers_test checks the module's import rules: which packages may import which. Go
// refuses cycles by itself; these rules keep the arrows pointing the way DESIGN.md and
// docs/architecture.md draw them.
package layers_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/fleetgo/fleet/"

// imports maps each package directory of the module (relative, slash-separated) to the module
// packages its non-test files import (relative too).
func imports(t *testing.T) map[string]map[string]bool {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Other modules (dev/controlplane, dev/node) and build output are not ours to check.
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata" ||
				fileExists(filepath.Join(p, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		dir = filepath.ToSlash(dir)
		if out[dir] == nil {
			out[dir] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if rel, ok := strings.CutPrefix(path, module); ok {
				out[dir][rel] = true
			} else if strings.HasPrefix(path, "k8s.io/client-go") || strings.Contains(path, "/generated/controllers") {
				out[dir]["client:"+path] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out["internal/controller/bundle"]) == 0 {
		t.Fatalf("found no imports of internal/controller/bundle: walked the wrong tree (%s)", root)
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func under(pkg, prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }

// product is code that ships in the fleet binary or as its API.
func product(pkg string) bool {
	return pkg == "." || (under(pkg, "internal") && !under(pkg, "internal/harness")) || under(pkg, "pkg")
}

// pure packages hold logic that needs no client: they are tested without a cluster. Neither
// they nor anything they import, however deep, uses a client.
var pure = []string{"internal/target", "internal/summary", "internal/names", "internal/bdstatus",
	"internal/restriction", "internal/policy", "internal/render", "internal/yamldoc", "internal/rollout", "internal/helmrelease", "internal/notify"}

// clientThrough is the first client package that pkg reaches through the module's packages it
// imports, however deep, with the path it takes ("" when none).
func clientThrough(all map[string]map[string]bool, pkg string) string {
	seen := map[string]bool{pkg: true}
	type step struct{ pkg, path string }
	queue := []step{{pkg, pkg}}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for imp := range all[cur.pkg] {
			if strings.HasPrefix(imp, "client:") {
				return cur.path + " -> " + strings.TrimPrefix(imp, "client:")
			}
			if !seen[imp] {
				seen[imp] = true
				queue = append(queue, step{imp, cur.path + " -> " + imp})
			}
		}
	}
	return ""
}

func TestImportRules(t *testing.T) {
	rules := []struct {
		name string
		// broken says whether pkg importing imp breaks the rule.
		broken func(pkg, imp string) bool
	}{
		{"product code imports no test harness, benchmark, test suite or dev tool", func(pkg, imp string) bool {
			return product(pkg) && (under(imp, "internal/harness") || under(imp, "benchmarks") ||
				under(imp, "integrationtests") || under(imp, "e2e") || under(imp, "dev"))
		}},
		{"in product code, only the command tree imports the CLI verbs, and only main the command tree", func(pkg, imp string) bool {
			return product(pkg) && ((under(imp, "internal/cli") && pkg != "internal/cmd" && !under(pkg, "internal/cli")) ||
				(imp == "internal/cmd" && pkg != "."))
		}},
		{"the manager's and the agent's controllers do not import each other", func(pkg, imp string) bool {
			return (under(pkg, "internal/controller") && under(imp, "internal/agent")) ||
				(under(pkg, "internal/agent") && under(imp, "internal/controller"))
		}},
		{"the API imports nothing of the implementation", func(pkg, imp string) bool {
			return under(pkg, "pkg/apis") && under(imp, "internal")
		}},
	}
	all := imports(t)
	t.Run("pure packages use no clients, not even through what they import", func(t *testing.T) {
		for _, p := range pure {
			if all[p] == nil {
				t.Errorf("pure package %s is not in the tree", p)
			}
			if path := clientThrough(all, p); path != "" {
				t.Errorf("%s reaches a client: %s", p, path)
			}
		}
	})
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			for pkg, imps := range all {
				for imp := range imps {
					if r.broken(pkg, imp) {
						t.Errorf("%s imports %s", pkg, imp)
					}
				}
			}
		})
	}
}

// The rules can fail: each catches the import it is written against.
func TestImportRulesCatchTheirCase(t *testing.T) {
	if !product("internal/controller/bundle") || product("internal/harness/localcluster") || product("benchmarks/sim") {
		t.Fatal("product() misclassifies")
	}
	all := imports(t)
	if !all["internal/cmd"]["internal/cli/status"] {
		t.Fatal("internal/cmd should import internal/cli/status: the walk misses imports")
	}
	if !all["benchmarks/sim"]["internal/bdstatus"] {
		t.Fatal("benchmarks/sim should import internal/bdstatus: the walk misses non-product packages")
	}
	if clientThrough(all, "internal/cmd") == "" || clientThrough(all, "internal/controller") == "" {
		t.Fatal("internal/cmd and the controllers reach clients: clientThrough misses transitive imports")
	}
}

// maxFuncLines is the longest a function of product code may be (generated code aside).
const maxFuncLines = 60

func TestNoLongFunctionsInProductCode(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, top := range []string{"internal", "pkg"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if under(rel, "internal/harness") || under(rel, "pkg/generated") || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.HasPrefix(d.Name(), "zz_generated") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				checked++
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s is %d lines (at most %d): split it by what its parts do", rel, fd.Name.Name, n, maxFuncLines)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 500 {
		t.Fatalf("checked only %d functions: walked the wrong tree", checked)
	}
}

// The front pages stay current: every result file is cited by RESULTS.md, and the README stays a
// front door (the tours live in docs/).
func TestFrontPages(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	results, err := os.ReadFile(filepath.Join(root, "benchmarks", "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "benchmarks", "results"))
	if err != nil || len(entries) == 0 {
		t.Fatalf("benchmarks/results: %v (%d files)", err, len(entries))
	}
	for _, e := range entries {
		if !strings.Contains(string(results), "results/"+e.Name()) {
			t.Errorf("benchmarks/RESULTS.md does not cite results/%s", e.Name())
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n >= 150 {
		t.Errorf("README.md has %d lines: a front door has fewer than 150 (move tours into docs/)", n)
	}
}

// Every timed wait of the controllers and the agent is in architecture.md's table of intervals:
// a duration constant (N * time.Unit, or time.Unit) declared at package level there must be
// named in it.
func TestEveryIntervalIsListed(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, top := range []string{"internal/controller", "internal/agent"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				g, ok := decl.(*ast.GenDecl)
				if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
					continue
				}
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, v := range vs.Values {
						if !isDuration(v) {
							continue
						}
						found++
						if name := vs.Names[i].Name; !strings.Contains(string(doc), "`"+name+"`") {
							t.Errorf("%s: %s is not in docs/architecture.md's table of intervals", p, name)
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if found < 40 {
		t.Fatalf("found only %d duration constants: the walk misses them", found)
	}
}

// isDuration says whether e is time.Unit or N * time.Unit.
func isDuration(e ast.Expr) bool {
	unit := func(e ast.Expr) bool {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		x, ok := sel.X.(*ast.Ident)
		switch {
		case !ok || x.Name != "time":
			return false
		case sel.Sel.Name == "Nanosecond", sel.Sel.Name == "Microsecond", sel.Sel.Name == "Millisecond":
			return true
		}
		return sel.Sel.Name == "Second" || sel.Sel.Name == "Minute" || sel.Sel.Name == "Hour"
	}
	if unit(e) {
		return true
	}
	b, ok := e.(*ast.BinaryExpr)
	return ok && b.Op == token.MUL && (isDuration(b.X) || isDuration(b.Y))
}
