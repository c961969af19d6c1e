package locate

// StateDirDocs are the documents of TestStateDir, for the fuzz test, which
// lives outside the package because package config imports this one.
var StateDirDocs = func() (docs []string) {
	for _, tc := range stateDirCases {
		docs = append(docs, tc.doc)
	}
	return docs
}()
