package proposal

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestNodes(t *testing.T) {
	const root = "/ledger/aa/bb/cc/0xaabbcc/default/page/1"
	cases := []struct {
		name    string
		message string
		want    []NodeSpec
	}{
		{"text", "hello world", []NodeSpec{{Path: root, PrimaryType: DefaultPrimaryType, Properties: []Property{{"message", `"hello world"`}}}}},
		{"json array is text", `[1,2]`, []NodeSpec{{Path: root, PrimaryType: DefaultPrimaryType, Properties: []Property{{"message", `"[1,2]"`}}}}},
		{"object", ` {"title": "Hi", "jcr:primaryType": "cq:Page", "count": 1.50, "tags": ["a", "b"], "on": true, "none": null}`,
			[]NodeSpec{{Path: root, PrimaryType: "cq:Page", Properties: []Property{
				{"count", "1.50"}, {"none", "null"}, {"on", "true"}, {"tags", `["a","b"]`}, {"title", `"Hi"`}}}}},
		{"nested objects become children in name order", `{"z":{"v":1},"a":{"b":{"c":"d"}},"p":2}`,
			[]NodeSpec{
				{Path: root, PrimaryType: DefaultPrimaryType, Properties: []Property{{"p", "2"}}},
				{Path: root + "/a", PrimaryType: DefaultPrimaryType},
				{Path: root + "/a/b", PrimaryType: DefaultPrimaryType, Properties: []Property{{"c", `"d"`}}},
				{Path: root + "/z", PrimaryType: DefaultPrimaryType, Properties: []Property{{"v", "1"}}},
			}},
		{"cid", `{"ledger:cid":"QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"}`,
			[]NodeSpec{{Path: root, PrimaryType: DefaultPrimaryType, Properties: []Property{{"ledger:cid", `"QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"`}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Nodes(root, []byte(tc.message))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestNodesRejects(t *testing.T) {
	const root = "/ledger/aa/bb/cc/0xaabbcc/default/page"
	deep := strings.Repeat(`{"a":`, MaxPathDepth+1) + "1" + strings.Repeat("}", MaxPathDepth+1)
	for name, msg := range map[string]string{
		"broken":               `{"a":1`,
		"trailing data":        `{"a":1} x`,
		"duplicate key":        `{"a":1,"a":2}`,
		"object in array":      `{"a":[{"b":1}]}`,
		"array in array":       `{"a":[[1]]}`,
		"slash in name":        `{"a/b":1}`,
		"dot-dot name":         `{"..":{"x":1}}`,
		"empty name":           `{"":1}`,
		"system namespace":     `{"ledger:revision":1}`,
		"primary type number":  `{"jcr:primaryType":1}`,
		"primary type slash":   `{"jcr:primaryType":"a/b"}`,
		"cid wrong type":       `{"ledger:cid":1}`,
		"too deep":             deep,
		"not an object at top": `{"a":1}{"b":2}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Nodes(root, []byte(msg)); !errors.Is(err, ErrMessage) {
				t.Fatalf("got %v, want ErrMessage", err)
			}
		})
	}
}
