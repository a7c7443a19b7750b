// Datasets, seeded files and parts: the record scanner and CSV cells fed bytes directly, records
// made into samples, the three loaders on files (lazy reading, ids, errors naming file:line),
// seeded files written into a folder that holds links, and the part builders.
#include "study/dataset_records.hpp"

#include <mira/protocol/codec.hpp>
#include <mira/study/dataset.hpp>
#include <mira/study/parts.hpp>
#include <mira/study/seed_files.hpp>

#include "common/temp_dir.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace json = boost::json;
namespace study = mira::study;
namespace parts = mira::study::parts;
using mira::study::detail::record_scanner;
using mira::test::temp_dir;

namespace {

void write(const std::filesystem::path& file, std::string_view text) {
  std::ofstream(file, std::ios::binary) << text;
}

std::string read(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct scanned {
  std::uint64_t offset, line;
  std::string text;
  bool operator==(const scanned&) const = default;
};
std::ostream& operator<<(std::ostream& os, const scanned& s) {
  return os << s.offset << ":" << s.line << ":" << s.text;
}

// Every record of `input` fed `step` bytes at a time; the failure's line and text at the end,
// if any.
std::vector<scanned> scan(record_scanner::syntax syntax, std::string_view input, std::size_t step,
                          std::string* failure = nullptr, std::size_t max_record = 1000) {
  record_scanner s(syntax, max_record);
  std::vector<scanned> out;
  for (std::size_t at = 0;; at += step) {
    bool end = at >= input.size();
    if (!end) s.feed(input.substr(at, step));
    for (;;) {
      auto r = end ? s.finish() : s.next();
      if (!r) {
        if (failure) *failure = std::to_string(r.error().line) + ": " + r.error().what;
        return out;
      }
      if (!*r) break;
      out.push_back({(*r)->offset, (*r)->line, std::string((*r)->text)});
    }
    if (end) return out;
  }
}

json::object obj(std::string_view text) {
  return json::parse(text).as_object();
}

std::string sample_error(std::string_view record) {
  auto s = study::detail::record_sample(obj(record), "x", {}, "/data");
  return s ? std::string() : s.error();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(study_dataset)

BOOST_AUTO_TEST_CASE(lines_come_with_their_offsets_and_line_numbers_however_split) {
  std::string input = "{\"a\":1}\r\n\n  \n{\"b\":2}\n{\"c\":3}";
  std::vector<scanned> want{{0, 1, "{\"a\":1}"}, {13, 4, "{\"b\":2}"}, {21, 5, "{\"c\":3}"}};
  for (std::size_t step : {1U, 2U, 3U, 7U, 100U}) {
    BOOST_TEST_CONTEXT("step " << step) {
      BOOST_TEST(scan(record_scanner::syntax::lines, input, step) == want,
                 boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(csv_records_keep_line_breaks_inside_quotes) {
  std::string input = "id,input\r\na,\"two\nlines\"\n\nb,\"say \"\"hi\"\"\"\n";
  std::vector<scanned> want{
      {0, 1, "id,input"}, {10, 2, "a,\"two\nlines\""}, {25, 5, "b,\"say \"\"hi\"\"\""}};
  for (std::size_t step : {1U, 4U, 100U})
    BOOST_TEST(scan(record_scanner::syntax::csv, input, step) == want,
               boost::test_tools::per_element());
  std::string failure;
  scan(record_scanner::syntax::csv, "id\n\"open\nstill open", 3, &failure);
  BOOST_TEST(failure == "2: a quote opened in this record is not closed at the end of the file");
}

BOOST_AUTO_TEST_CASE(an_overlong_record_fails_without_waiting_for_its_end) {
  std::string failure;
  auto got = scan(record_scanner::syntax::lines, "{}\n" + std::string(50, 'x'), 5, &failure, 20);
  BOOST_TEST(got.size() == 1U);
  BOOST_TEST(failure ==
             "2: the record is longer than the 20 bytes read (dataset_options::max_record)");
}

BOOST_AUTO_TEST_CASE(csv_cells_follow_rfc_4180) {
  using study::detail::csv_cells;
  BOOST_TEST((*csv_cells("a,\"b,c\",,\"d \"\"e\"\"\"") ==
              std::vector<std::string>{"a", "b,c", "", "d \"e\""}));
  BOOST_TEST((*csv_cells("") == std::vector<std::string>{""}));
  BOOST_TEST((*csv_cells("a,") == std::vector<std::string>{"a", ""}));
  BOOST_TEST(csv_cells("a,b\"c").error() ==
             "cell 2: a quote inside an unquoted cell (quote the cell and double the quotes "
             "inside)");
  BOOST_TEST(csv_cells("\"a\"b").error() == "cell 1: text after its closing quote");
  BOOST_TEST(csv_cells("x,\"a").error() == "cell 2: its quote is not closed");
}

BOOST_AUTO_TEST_CASE(a_record_becomes_a_sample) {
  auto s = study::detail::record_sample(
      obj(R"({"input": "hi", "expected": {"n": 1}, "tags": ["a", "b"], "metadata": {"k": 2},
              "files": {"src/main.c": "int main;"}, "other": true})"),
      "r1", {}, "/data");
  BOOST_REQUIRE(s);
  BOOST_TEST(s->id == "r1");
  BOOST_TEST((s->input == json::array{"hi"}));
  BOOST_TEST((*s->expected == json::parse(R"({"n": 1})")));
  BOOST_TEST((s->tags == std::vector<std::string>{"a", "b"}));
  BOOST_TEST((s->metadata == obj(R"({"k": 2})")));
  BOOST_REQUIRE(s->files.size() == 1U);
  BOOST_TEST(s->files[0].path == "src/main.c");
  BOOST_TEST(s->files[0].contents == "int main;");

  auto turns =
      study::detail::record_sample(obj(R"({"input": ["one", {"kind": "text", "text": "two"},
                        {"role": "user", "content": [{"kind": "image", "media_type": "image/png",
                                                      "source": {"uri": "https://x/cat.png"}}]}],
              "expected": null,
              "files": [{"path": "a.txt", "contents": "A"}, {"path": "b/c.txt", "source": "in/c"}]})"),
                                   "r2", {}, "/data");
  BOOST_REQUIRE(turns);
  BOOST_TEST(turns->input.size() == 3U);
  BOOST_TEST(!turns->expected);
  BOOST_REQUIRE(turns->files.size() == 2U);
  BOOST_TEST(turns->files[1].source.value_or("") == "/data/in/c");

  auto renamed = study::detail::record_sample(obj(R"({"question": "q", "answer": "a"})"), "r3",
                                              {"", "question", "answer", "", "", ""}, "/data");
  BOOST_REQUIRE(renamed);
  BOOST_TEST((renamed->input == json::array{"q"}));
  BOOST_TEST((*renamed->expected == "a"));
}

BOOST_AUTO_TEST_CASE(a_bad_record_says_which_field_and_what_is_wrong) {
  struct row {
    const char* record;
    const char* error;
  };
  for (auto& r : std::vector<row>{
           {R"({"input": 7})", "input: expected a string or an array of turns, got a number"},
           {R"({"input": [true]})",
            "input[0]: expected a string, a part or a message, got a boolean"},
           {R"({"input": [{"kind": "image"}]})", "input[0].source: a image part needs a source"},
           {R"({"input": [{"role": "user", "content": [{"kind": "audio", "source": {}}]}]})",
            "input[0].content[0].source: must have exactly one of uri or data"},
           {R"({"input": [{"role": 1, "content": "x"}]})",
            "input[0].role: expected a string, got a number"},
           {R"({"input": [{"text": "x"}]})",
            "input[0]: a turn object is a part (with kind) or a message (with role)"},
           {R"({"tags": ["a", 2]})", "tags[1]: expected a string, got a number"},
           {R"({"tags": "a"})", "tags: expected an array of strings, got a string"},
           {R"({"metadata": []})", "metadata: expected an object, got an array"},
           {R"({"files": {"../up": "x"}})",
            "files: '../up': the path climbs out of its folder with .."},
           {R"({"files": {"/etc/passwd": "x"}})", "files: '/etc/passwd': the path is absolute"},
           {R"({"files": {"a": 1}})",
            "files.a: expected a string (the file's contents), got a number"},
           {R"({"files": [{"path": "a"}]})", "files[0]: give exactly one of contents and source"},
           {R"({"files": [{"path": "a", "source": "../secret"}]})",
            "files[0].source: '../secret': the path climbs out of its folder with .."},
           {R"({"files": "a"})",
            "files: expected an object {path: contents} or an array of files, got a string"},
       }) {
    BOOST_TEST(sample_error(r.record) == r.error, r.record);
  }
  using study::detail::record_id;
  BOOST_TEST(record_id(obj(R"({"id": 12})"), "id")->value() == "12");
  BOOST_TEST(!record_id(obj(R"({"x": 1})"), "id")->has_value());
  BOOST_TEST(record_id(obj(R"({"id": ""})"), "id").error() == "id: the id is empty");
  BOOST_TEST(record_id(obj(R"({"id": 1.5})"), "id").error() ==
             "id: expected a string or an integer, got a number");
}

BOOST_AUTO_TEST_CASE(a_jsonl_dataset_reads_its_records_when_asked) {
  temp_dir d;
  auto file = d.path / "qa.jsonl";
  std::string l1 = R"({"id": "q1", "input": "one", "expected": "1", "tags": ["t"]})";
  std::string l3 = R"({"id": 2, "input": "two", "files": [{"path": "x", "source": "s.txt"}]})";
  std::string l4 = R"({"id": "q3", "input": "three"})";
  write(file, l1 + "\n\n" + l3 + "\n" + l4 + "\n");
  auto ds = study::jsonl(file);
  BOOST_REQUIRE_MESSAGE(ds, (ds ? "" : ds.error().message()));
  BOOST_TEST(ds->size() == 3U);
  BOOST_TEST(!ds->ids_are_positions());
  BOOST_TEST(ds->at(0).id == "q1");
  BOOST_TEST((ds->at(0).info().tags == std::vector<std::string>{"t"}));
  BOOST_TEST(ds->at(1).id == "2");
  BOOST_TEST(ds->at(1).files.at(0).source.value_or("") == (d.path / "s.txt").string());
  BOOST_TEST(ds->index_of("q3").value_or(9) == 2U);
  BOOST_TEST(ds->index_of("2").value_or(9) == 1U);
  BOOST_TEST(!ds->index_of("q4"));
  BOOST_CHECK_THROW(ds->at(3), std::out_of_range);

  // Records are read again when asked for: a record changed since is that sample's error.
  auto g = ds->generator();
  BOOST_TEST(g.count == 3U);
  std::string changed = R"({"id": 2, "tags": 5})";
  changed.resize(l3.size(), ' ');
  write(file, l1 + "\n\n" + changed + "\n");
  BOOST_TEST((g.make(0).input == json::array{"one"}));
  try {
    g.make(1);
    BOOST_FAIL("a changed record was read");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(e.what() == file.string() + ":3: tags: expected an array of strings, got a number");
  }
  try {
    g.make(2);
    BOOST_FAIL("a removed record was read");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(e.what() == file.string() +
                               ":4: the record is no longer there (the file changed since it was "
                               "loaded)");
  }
}

BOOST_AUTO_TEST_CASE(without_ids_a_record_is_known_by_its_line) {
  temp_dir d;
  auto file = d.path / "plain.jsonl";
  write(file, "\n{\"input\": \"a\"}\n{\"input\": \"b\"}\n\n\n{\"input\": \"c\"}\n");
  auto ds = study::jsonl(file);
  BOOST_REQUIRE_MESSAGE(ds, (ds ? "" : ds.error().message()));
  BOOST_TEST(ds->ids_are_positions());
  BOOST_TEST(ds->at(0).id == "2");
  BOOST_TEST(ds->at(1).id == "3");
  BOOST_TEST(ds->at(2).id == "6");
  BOOST_TEST(ds->index_of("6").value_or(9) == 2U);
  BOOST_TEST(ds->index_of("2").value_or(9) == 0U);
  for (auto* none : {"1", "4", "5", "7", "02", "", "-3", "x"})
    BOOST_TEST(!ds->index_of(none), none);

  study::dataset_options named_but_ignored;
  named_but_ignored.fields.id = "";
  write(file, "{\"id\": \"x\"}\n{\"id\": \"x\"}\n");
  auto by_line = study::jsonl(file, named_but_ignored);
  BOOST_REQUIRE(by_line);
  BOOST_TEST(by_line->at(1).id == "2");
}

BOOST_AUTO_TEST_CASE(a_dataset_that_cannot_be_used_fails_to_load_naming_file_and_line) {
  temp_dir d;
  auto file = d.path / "bad.jsonl";
  struct row {
    const char* text;
    const char* error;  // after "FILE:"
  };
  for (auto& r : std::vector<row>{
           {"{\"id\": \"a\"}\n{\"id\": \"b\"\n", "2: not JSON (incomplete JSON)"},
           {"{\"id\": \"a\"}\n[1]\n", "2: expected a JSON object, got an array"},
           {"{\"id\": \"a\"}\n{\"input\": \"x\"}\n",
            "2: id: no id (the first record has one, so every record needs one)"},
           {"{\"input\": \"x\"}\n{\"id\": \"b\"}\n",
            "2: id: the first record has no id, so ids are the records' positions; this one has "
            "one"},
           {"{\"id\": \"a\"}\n{\"id\": \"b\"}\n\n{\"id\": \"a\"}\n",
            "4: id: 'a' is also the id of " /* FILE:1 */},
           {"{\"id\": \"a\", \"tags\": {}}\n",
            "1: tags: expected an array of strings, got an object"},
       }) {
    write(file, r.text);
    auto ds = study::jsonl(file);
    BOOST_REQUIRE(!ds);
    BOOST_TEST((ds.error().code == study::errc::dataset_invalid));
    auto want = file.string() + ":" + r.error;
    if (std::string_view(r.error).ends_with("id of ")) want += file.string() + ":1";
    BOOST_TEST(ds.error().message() == want);
  }
  auto missing = study::jsonl(d.path / "none.jsonl");
  BOOST_REQUIRE(!missing);
  BOOST_TEST((missing.error().code == study::errc::file_unreadable));
  BOOST_TEST(missing.error().message() ==
             "cannot read " + (d.path / "none.jsonl").string() + ": No such file or directory");
}

BOOST_AUTO_TEST_CASE(a_csv_dataset_maps_its_columns) {
  temp_dir d;
  auto file = d.path / "qa.csv";
  write(file,
        "id,input,expected,tags,difficulty,files\r\n"
        "c1,\"What is 1+1?\",2,\"math; easy\",low,\r\n"
        "c2,\"Two\nlines\",,smoke,high,\"{\"\"a.txt\"\": \"\"A\"\"}\"\r\n");
  auto ds = study::csv(file);
  BOOST_REQUIRE_MESSAGE(ds, (ds ? "" : ds.error().message()));
  BOOST_TEST(ds->size() == 2U);
  auto c1 = ds->at(0);
  BOOST_TEST((c1.input == json::array{"What is 1+1?"}));
  BOOST_TEST((*c1.expected == "2"));
  BOOST_TEST((c1.tags == std::vector<std::string>{"math", "easy"}));
  BOOST_TEST((c1.metadata == obj(R"({"difficulty": "low"})")));
  auto c2 = ds->at(1);
  BOOST_TEST((c2.input == json::array{"Two\nlines"}));
  BOOST_TEST(!c2.expected);
  BOOST_TEST(c2.files.at(0).contents == "A");
  BOOST_TEST(ds->index_of("c2").value_or(9) == 1U);

  write(file, "input\na\n\"b\nb\"\nc\n");
  auto by_line = study::csv(file);
  BOOST_REQUIRE(by_line);
  BOOST_TEST(by_line->at(0).id == "2");
  BOOST_TEST(by_line->at(1).id == "3");
  BOOST_TEST(by_line->at(2).id == "5");
  BOOST_TEST(by_line->index_of("5").value_or(9) == 2U);
  BOOST_TEST(!by_line->index_of("4"));

  for (auto [text, error] : std::vector<std::pair<std::string, std::string>>{
           {"id,input\na,b,c\n", ":2: the row has 3 cells, the header 2"},
           {"id,id\n", ":1: header: two columns are named id"},
           {"id,input\na,b\"\n",
            ":2: cell 2: a quote inside an unquoted cell (quote the cell and "
            "double the quotes inside)"},
           {"id,metadata\na,[1]\n", ":2: metadata: expected an object, got an array"},
           {"", ": no header row"},
       }) {
    write(file, text);
    auto bad = study::csv(file);
    BOOST_REQUIRE(!bad);
    BOOST_TEST(bad.error().message() == file.string() + error);
  }
}

BOOST_AUTO_TEST_CASE(a_json_array_dataset_is_held_whole) {
  temp_dir d;
  auto file = d.path / "qa.json";
  write(file, R"([{"input": "a", "expected": 1}, {"input": ["b"]}])");
  auto ds = study::json_array(file);
  BOOST_REQUIRE_MESSAGE(ds, (ds ? "" : ds.error().message()));
  BOOST_TEST(ds->ids_are_positions());
  BOOST_TEST(ds->at(1).id == "2");
  BOOST_TEST(ds->index_of("1").value_or(9) == 0U);
  BOOST_TEST(!ds->index_of("3"));
  write(file, R"([{"id": "a"}, 3])");
  BOOST_TEST(study::json_array(file).error().message() ==
             file.string() + ": record 2: expected a JSON object, got a number");
  write(file, R"({"id": "a"})");
  BOOST_TEST(study::json_array(file).error().message() ==
             file.string() + ": expected an array of records, got an object");
}

BOOST_AUTO_TEST_CASE(seed_paths_stay_inside_their_folder) {
  for (auto* ok : {"a", "a/b.txt", "dir/sub/file", ".hidden", "a..b"})
    BOOST_TEST(study::check_seed_path(ok).empty(), ok);
  for (auto [path, why] : std::vector<std::pair<std::string, std::string>>{
           {"", "the path is empty"},
           {"/abs", "the path is absolute"},
           {"a/../b", "the path climbs out of its folder with .."},
           {"..", "the path climbs out of its folder with .."},
           {"./a", "the path has a . component"},
           {"a//b", "the path has an empty component"},
           {"a/", "the path has an empty component"},
           {std::string("a\0b", 3), "the path holds a NUL byte"},
       })
    BOOST_TEST(study::check_seed_path(path) == why);
}

BOOST_AUTO_TEST_CASE(seeded_files_are_written_into_their_folder_and_nowhere_else) {
  temp_dir d;
  auto work = d.path / "work";
  auto outside = d.path / "outside";
  std::filesystem::create_directories(work);
  std::filesystem::create_directories(outside);
  write(d.path / "source.txt", "from the source");
  study::sample s;
  s.file("a.txt", "A")
      .file("deep/er/b.txt", "B")
      .file_from("c.txt", (d.path / "source.txt").string());
  s.file("a.txt", "A again");
  auto ok = study::materialize_files(s.files, work);
  BOOST_REQUIRE_MESSAGE(ok, (ok ? "" : ok.error().message()));
  BOOST_TEST(read(work / "a.txt") == "A again");
  BOOST_TEST(read(work / "deep/er/b.txt") == "B");
  BOOST_TEST(read(work / "c.txt") == "from the source");

  // Links planted in the folder: none is followed, nothing outside changes.
  std::filesystem::create_directory_symlink(outside, work / "linkdir");
  std::filesystem::create_symlink(outside / "target.txt", work / "link.txt");
  write(outside / "hard.txt", "outside");
  BOOST_REQUIRE(::link((outside / "hard.txt").c_str(), (work / "hard.txt").c_str()) == 0);
  BOOST_REQUIRE(::mkfifo((work / "fifo").c_str(), 0600) == 0);
  struct row {
    study::seed_file f;
    study::errc code;
    std::string message;
  };
  for (auto& r : std::vector<row>{
           {{"linkdir/x.txt", "x", {}},
            study::errc::unsafe_path,
            "seeded file linkdir/x.txt: 'linkdir' on its way is a link or not a folder"},
           {{"a.txt/x", "x", {}},
            study::errc::unsafe_path,
            "seeded file a.txt/x: 'a.txt' on its way is a link or not a folder"},
           {{"link.txt", "x", {}},
            study::errc::unsafe_path,
            "seeded file link.txt: it is a symbolic link"},
           {{"hard.txt", "x", {}},
            study::errc::unsafe_path,
            "seeded file hard.txt: it has another (hard) link"},
           {{"fifo", "x", {}}, study::errc::unsafe_path, "seeded file fifo: it is a FIFO"},
           {{"../escape.txt", "x", {}},
            study::errc::unsafe_path,
            "seeded file ../escape.txt: the path climbs out of its folder with .."},
           {{"deep", "x", {}}, study::errc::unsafe_path, "seeded file deep: it is a folder"},
           {{"m.txt", "", (d.path / "missing").string()},
            study::errc::file_unreadable,
            "cannot read " + (d.path / "missing").string() + ": No such file or directory"},
       }) {
    auto bad = study::materialize_files({r.f}, work);
    BOOST_REQUIRE(!bad);
    BOOST_TEST((bad.error().code == r.code), r.f.path);
    BOOST_TEST(bad.error().message() == r.message);
  }
  BOOST_TEST(read(outside / "hard.txt") == "outside");
  BOOST_TEST(!std::filesystem::exists(outside / "x.txt"));
  BOOST_TEST(!std::filesystem::exists(outside / "target.txt"));
  BOOST_TEST(!std::filesystem::exists(d.path / "escape.txt"));

  auto big = study::materialize_files({{"big", std::string(11, 'x'), {}}}, work, 10);
  BOOST_TEST((big.error().code == study::errc::file_too_large));
  auto big_source = study::read_seed_file({"big", {}, (d.path / "source.txt").string()}, 3);
  BOOST_TEST(big_source.error().message() ==
             (d.path / "source.txt").string() + " is 15 bytes, more than the limit of 3");
}

BOOST_AUTO_TEST_CASE(base64_and_media_types) {
  for (auto [in, out] : std::vector<std::pair<std::string, std::string>>{
           {"", ""},
           {"f", "Zg=="},
           {"fo", "Zm8="},
           {"foo", "Zm9v"},
           {"foob", "Zm9vYg=="},
           {"fooba", "Zm9vYmE="},
           {"foobar", "Zm9vYmFy"},
           {std::string("\xff\x00\xfe", 3), "/wD+"},
       })
    BOOST_TEST(parts::base64(in) == out);
  BOOST_TEST(parts::media_type_of("cat.PNG") == "image/png");
  BOOST_TEST(parts::media_type_of("a/b.jpeg") == "image/jpeg");
  BOOST_TEST(parts::media_type_of("x.mp3") == "audio/mpeg");
  BOOST_TEST(parts::media_type_of("doc.pdf") == "application/pdf");
  BOOST_TEST(parts::media_type_of("noext").empty());
  BOOST_TEST(parts::media_type_of("x.unknown").empty());
}

BOOST_AUTO_TEST_CASE(parts_from_files_are_protocol_parts) {
  temp_dir d;
  const std::string png("\x89PNG\r\n\x1a\n", 8);
  write(d.path / "cat.png", png);
  write(d.path / "notes.bin", "abc");
  write(d.path / "song.wav", "RIFF");
  auto cat = parts::image_file(d.path / "cat.png");
  BOOST_REQUIRE_MESSAGE(cat, (cat ? "" : cat.error().message()));
  BOOST_TEST(cat->kind == "image");
  BOOST_TEST(cat->media_type == "image/png");
  BOOST_TEST((*cat->uri == "data:image/png;base64," + parts::base64(png)));
  parts::file_options inline_data;
  inline_data.encoding = parts::inline_as::base64;
  inline_data.media_type = "application/x-notes";
  auto notes = parts::attachment(d.path / "notes.bin", inline_data);
  BOOST_REQUIRE(notes);
  BOOST_TEST(notes->name == "notes.bin");
  BOOST_TEST(*notes->data == "YWJj");
  BOOST_TEST(!notes->uri);
  BOOST_TEST(parts::attachment(d.path / "notes.bin")->media_type == "application/octet-stream");
  BOOST_TEST(parts::audio_file(d.path / "song.wav")->media_type == "audio/wav");

  // Each is read back by the protocol's own part decoder as it was built.
  for (auto& p : {*cat, *notes, parts::text("hello"), parts::json_value(json::object{{"k", 1}}),
                  parts::image_uri("image/gif", "https://x/y.gif")}) {
    auto back = mira::protocol::decode_part(parts::to_json(p));
    BOOST_REQUIRE_MESSAGE(back, (back ? "" : back.error().message()));
    BOOST_TEST(back->kind == p.kind);
    BOOST_TEST(back->text == p.text);
    BOOST_TEST(back->media_type == p.media_type);
    BOOST_TEST(back->name == p.name);
    BOOST_TEST((back->uri == p.uri));
    BOOST_TEST((back->data == p.data));
    BOOST_TEST((back->json == p.json));
  }

  struct row {
    std::filesystem::path file;
    bool image;
    study::errc code;
    std::string message;
  };
  parts::file_options small;
  small.max_bytes = 4;
  for (auto& r : std::vector<row>{
           {d.path / "cat.png", true, study::errc::file_too_large,
            (d.path / "cat.png").string() + " is 8 bytes, more than the limit of 4"},
           {d.path / "notes.bin", true, study::errc::unknown_media_type,
            "cannot tell the media type of " + (d.path / "notes.bin").string() +
                " from its extension: give file_options::media_type"},
           {d.path / "song.wav", true, study::errc::unknown_media_type,
            (d.path / "song.wav").string() + " is audio/wav, not an image"},
           {d.path / "cat.png", false, study::errc::unknown_media_type,
            (d.path / "cat.png").string() + " is image/png, not audio"},
           {d.path / "gone.png", true, study::errc::file_unreadable,
            "cannot read " + (d.path / "gone.png").string() + ": No such file or directory"},
       }) {
    auto p = r.image ? parts::image_file(r.file, small) : parts::audio_file(r.file, small);
    BOOST_REQUIRE(!p);
    BOOST_TEST((p.error().code == r.code));
    BOOST_TEST(p.error().message() == r.message);
  }
}

BOOST_AUTO_TEST_CASE(a_sample_whose_input_is_a_message_with_text_and_an_image) {
  temp_dir d;
  write(d.path / "cat.png", std::string("\x89PNG\r\n\x1a\n", 8));
  auto cat = parts::image_file(d.path / "cat.png");
  BOOST_REQUIRE(cat);
  study::sample s{"cat", {parts::message("user", {parts::text("What is this?"), *cat})}};
  // What a dataset line holding the same input reads as: the same sample.
  auto line = json::serialize(json::object{{"id", "cat"}, {"input", s.input}});
  write(d.path / "one.jsonl", line + "\n");
  auto ds = study::jsonl(d.path / "one.jsonl");
  BOOST_REQUIRE_MESSAGE(ds, (ds ? "" : ds.error().message()));
  BOOST_TEST((ds->at(0).input == s.input));
  auto& content = s.input[0].at("content").as_array();
  BOOST_TEST((content[0].at("kind") == "text"));
  BOOST_TEST(content[1].at("source").at("uri").as_string().starts_with("data:image/png;base64,"));
}

BOOST_AUTO_TEST_SUITE_END()
