// Package objmeta is what bucketfs writes on the objects it uploads,
// and reads back from them: the custom metadata keys it gives a meaning
// to, their formats, and the names it saves a conflicting local version
// under.
//
// It owns:
//   - MtimeKey, a file's modification time (the key gcsfuse reads too),
//     and its format (FormatMtime, ParseMtime, Mtime);
//   - AttemptKey, the ID of the upload that wrote an object version
//     (NewAttemptID, WrittenBy): how a cache tells its own unconfirmed
//     uploads from another writer's versions;
//   - the custom metadata an upload carries (ForUpload), the part of a
//     bucket version's metadata a new local version keeps (Own), and a
//     local version's after a change of its metadata (Set: keys set,
//     never removed, in a new map);
//   - ConflictName, the name a local version is saved under beside a
//     version another writer made.
//
// Invariants: Own never keeps AttemptKey, so an upload ID is never
// carried from one version to the next; ForUpload always sets it (empty
// only when a comparison asks for it: SameMeta). A ConflictName is a
// valid file name (at most 255 bytes per path component) and object
// name (at most 1,024 bytes of UTF-8).
//
// Everything here is a pure function of plain values: no state, no
// lock, no I/O.
package objmeta
