package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// goConstant reads a string constant of the repository's Go source, named
// "<package directory>.<Name>" ("api/v1alpha1.DefaultImage"), so an image
// can carry the name the API defaults to without the name being copied.
func goConstant(repo, ref string) (string, error) {
	i := strings.LastIndex(ref, ".")
	if i <= 0 {
		return "", fmt.Errorf("constant %q: want <package directory>.<Name>", ref)
	}
	dir, want := filepath.Join(repo, ref[:i]), ref[i+1:]
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return "", err
		}
		if value, ok := stringConstant(f, want); ok {
			return value, nil
		}
	}
	return "", fmt.Errorf("no string constant %s in %s", want, dir)
}

// stringConstant finds the string literal constant name declares in f.
func stringConstant(f *ast.File, name string) (string, bool) {
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, s := range gen.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if lit, ok := valueAt(vs, i).(*ast.BasicLit); n.Name == name && ok && lit.Kind == token.STRING {
					value, err := strconv.Unquote(lit.Value)
					return value, err == nil
				}
			}
		}
	}
	return "", false
}

func valueAt(vs *ast.ValueSpec, i int) ast.Expr {
	if i < len(vs.Values) {
		return vs.Values[i]
	}
	return nil
}

// specImage matches an EmbeddingServer's spec.image line in an example.
var specImage = regexp.MustCompile(`^  image:\s*"?([^"\s#]+)"?\s*(?:#.*)?$`)

// exampleImage reads spec.image of the EmbeddingServer in the example
// manifest at path, relative to the repository.
func exampleImage(repo, path string) (string, error) {
	f, err := os.Open(filepath.Join(repo, path))
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	scanner := bufio.NewScanner(f)
	inSpec := false
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, " ") && line != "" {
			inSpec = line == "spec:"
		}
		if m := specImage.FindStringSubmatch(line); inSpec && m != nil {
			return m[1], nil
		}
	}
	if err := scanner.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s sets no spec.image", path)
}
