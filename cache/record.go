package cache

import "github.com/bucketfs/bucketfs/cache/internal/durable"

// record is the persisted state of one cached object version. Its format
// on disk (the index, the journal, the data files' descriptions) belongs
// to package durable; what a record costs and when it is changed belong
// here.
type record = durable.Record
