// An object as Arrow reads files (arrow::io::RandomAccessFile), for the Parquet reader
// (parquet.cc): a local file through Arrow's own reader, a remote one (s3://, http(s)://) as
// ranged GETs through a Fetcher, with its retries and deadlines, one read at a time.
//
// Example:
//   storage::Fetcher fetcher(options, s3);
//   MMFEED_ASSIGN_OR_RETURN(auto file, open_arrow_file(uri, name, fetcher));  // fetcher outlives file
#pragma once

#include <arrow/io/interfaces.h>

#include <memory>
#include <string>

#include "mmfeed/error.h"
#include "storage/fetcher.h"
#include "storage/uri.h"

namespace mmfeed::dataset {

// The file `uri` (shown as `name`), opened for Arrow; a remote one's size comes from its first
// read's Content-Range (an answer without one is refused).
Result<std::shared_ptr<arrow::io::RandomAccessFile>> open_arrow_file(const storage::ObjectUri& uri,
                                                                     const std::string& name,
                                                                     storage::Fetcher& fetcher);

}  // namespace mmfeed::dataset
